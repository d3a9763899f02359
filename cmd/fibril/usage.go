package main

// Usage texts and error lines of every command: `fibril -h`, `fibril <cmd>
// -h` (synopsis, positional arguments, flags) and the one-line errors
// (`fibril <cmd>: <code>: <text>`).

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/fibrilmq/fibril/protocol"
)

// command describes one subcommand for the usage texts.
type command struct {
	name     string
	summary  string
	synopsis string      // after "fibril <name> "
	args     [][2]string // positional arguments: name, meaning
}

// commands is the table `fibril -h` and each `fibril <cmd> -h` print from.
var commands = []command{
	{"serve", "run the broker (defaults: 127.0.0.1:4222, data in ./fibril-data)", "[flags]", nil},
	{"pub", "publish one message", "[flags] <subject> <data>", [][2]string{
		{"<subject>", "where to publish; a subject a topic captures is stored durably"},
		{"<data>", "the message body"},
	}},
	{"sub", "print messages as they arrive", "[flags] <subject>", [][2]string{
		{"<subject>", "a subject filter (wildcards * and >), or a topic's name with -q <group>"},
	}},
	{"poll", "pull from a durable group", "[flags] <topic> <group>", [][2]string{
		{"<topic>", "the topic"},
		{"<group>", "the consumer group (created on first use when the server auto-creates)"},
	}},
	{"topics", "list, create, show or delete topics; requeue dead letters", "[flags] [list | create <name> [json] | info <name> | delete <name> | requeue <name> [json]]", [][2]string{
		{"list", "the topics' names (the default)"},
		{"create <name> [json]", "create a topic; json is its settings (SPEC.md §10.1), e.g. '{\"partitions\":2}'"},
		{"info <name>", "a topic's settings and state"},
		{"delete <name>", "delete a topic and its messages"},
		{"requeue <name> [json]", "move dead letters of <name> back to their subjects; json picks (SPEC.md 10), e.g. '{\"filter\":[\"orders.eu.>\"]}'"},
	}},
	{"groups", "list, create, show or delete a topic's consumer groups", "[flags] list <topic> | create <topic> <group> [json] | info <topic> <group> | delete <topic> <group>", [][2]string{
		{"list <topic>", "the names of the topic's groups"},
		{"create <topic> <group> [json]", "create a group; json is its settings (SPEC.md §10.2), e.g. '{\"start\":\"new\"}'"},
		{"info <topic> <group>", "a group's settings and counters"},
		{"delete <topic> <group>", "delete a group (its messages stay)"},
	}},
	{"tui", "watch messages move, in a terminal", "[flags]", nil},
	{"verify", "check a stopped server's data, change nothing", "[--data dir] [--json]", nil},
	{"repair", "quarantine damage, list what each group loses", "[--data dir] [--adopt] [--json]", nil},
	{"try-cluster", "run a cluster of 3 (or 5) nodes in this process, to try one on this machine", "[--nodes 3] [--dir fibril-cluster] [--port 4222]", nil},
	{"certs", "make a cluster CA and a certificate for each node, to try a cluster on this machine", "[--dir dir] [--days n] <node>...", [][2]string{
		{"<node>...", "the nodes' names (their certificates name them and 127.0.0.1, ::1, localhost)"},
	}},
	{"version", "print the version, commit and build date", "", nil},
}

func lookupCommand(name string) command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	panic("fibril: no usage for command " + name)
}

func usage(w io.Writer) {
	fmt.Fprint(w, "usage: fibril <command> [flags] [arguments]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'fibril <command> -h' for a command's arguments and flags.\n")
}

// newFlagSet is a command's flag set whose -h prints the synopsis, the
// positional arguments and the flags.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	c := lookupCommand(name)
	fs := flag.NewFlagSet("fibril "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: fibril %s %s\n\n%s\n", c.name, c.synopsis, c.summary)
		if len(c.args) > 0 {
			fmt.Fprint(w, "\narguments:\n")
			for _, a := range c.args {
				fmt.Fprintf(w, "  %-22s %s\n", a[0], a[1])
			}
		}
		fmt.Fprint(w, "\nflags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; when it returns false the command ends with
// code (0 for -h, 2 for bad usage: the flag package has said why).
func parseFlags(fs *flag.FlagSet, args []string) (ok bool, code int) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, 0
		}
		return false, 2
	}
	return true, 0
}

// badArgs reports wrong positional arguments, with the synopsis.
func badArgs(stderr io.Writer, name string) int {
	fmt.Fprintf(stderr, "usage: fibril %s %s\n", name, lookupCommand(name).synopsis)
	return 2
}

// fail prints one error line and returns exit code 1. A server's or the
// SDK's refusal prints as "fibril <cmd>: <code>: <text>[: <detail>]", once,
// however many layers wrapped it; other errors print their own text without
// the "fibril: " prefixes the layers below add.
func fail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "fibril %s: %s\n", cmd, errorText(err))
	return 1
}

func errorText(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		s := string(pe.Code) + ": " + pe.Code.Spec().Text
		if pe.Detail != "" {
			s += ": " + pe.Detail
		}
		if pe.Err != nil {
			s += ": " + errorText(pe.Err)
		}
		return s
	}
	return strings.ReplaceAll(err.Error(), "fibril: ", "")
}
