// Command fibril-check judges fault-run histories (internal/history): for
// each file given it prints the summary table (totals, one row per
// category of violation with examples, the verdict) and the run's seed.
//
//	fibril-check [-dlq topic] [-leases-survive-restart] [-examples n] history.jsonl...
//
// Exit codes: 0 every history valid, 1 a history invalid or incomplete, 2
// bad usage or an unreadable file.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/fibrilmq/fibril/internal/history"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fibril-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg history.Config
	fs.StringVar(&cfg.DeadLetterTopic, "dlq", "", "the dead-letter topic (default: the one the history's start phase names)")
	fs.BoolVar(&cfg.LeasesSurviveRestart, "leases-survive-restart", false, "a node restart does not excuse a delivery inside an earlier lease")
	fs.IntVar(&cfg.Examples, "examples", 5, "examples shown per category")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fibril-check [flags] history.jsonl...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	code := 0
	for _, path := range fs.Args() {
		ops, err := history.ReadFile(path)
		if err != nil {
			fmt.Fprintf(stderr, "fibril-check: %v\n", err)
			return 2
		}
		r := history.Check(ops, cfg)
		fmt.Fprintf(stdout, "== %s", path)
		for _, op := range ops {
			if op.Kind == history.Phase && op.Value == history.PhaseStart {
				fmt.Fprintf(stdout, " (seed %d)", op.Seed)
				break
			}
		}
		fmt.Fprintln(stdout)
		if err := r.WriteTable(stdout); err != nil {
			fmt.Fprintf(stderr, "fibril-check: %v\n", err)
			return 2
		}
		if !r.Valid() {
			code = 1
		}
	}
	return code
}
