package main

// fibril verify and fibril repair: flags → broker.Verify / broker.Repair
// → a summary. The logic is in server/broker (check.go, repair.go).

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/fibrilmq/fibril/server"
	"github.com/fibrilmq/fibril/server/broker"
)

// Exit codes of fibril verify, one per finding kind (the most severe found
// wins): 0 nothing but notes, then orphan, state, records, catalog.
var verifyExit = map[broker.FindingKind]int{
	broker.FindingOrphan:  10,
	broker.FindingState:   11,
	broker.FindingRecords: 12,
	broker.FindingCatalog: 13,
}

// fsckFlags are the flags verify and repair share.
type fsckFlags struct {
	fs     *flag.FlagSet
	data   string
	asJSON bool
	engine broker.Options
}

func newFsckFlags(name string, stderr io.Writer) *fsckFlags {
	f := &fsckFlags{fs: newFlagSet(name, stderr)} // usage.go: -h shows the synopsis
	def := server.DefaultOptions().DataDir
	if v, ok := os.LookupEnv("FIBRIL_DATA"); ok {
		def = v
	}
	f.fs.StringVar(&f.data, "data", def, "data directory of the stopped server (env FIBRIL_DATA)")
	f.fs.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	f.fs.Int64Var(&f.engine.SegmentSize, "segment-size", 0, "the server's --segment-size (0: 64 MiB)")
	f.fs.Int64Var(&f.engine.EventSegmentSize, "event-segment-size", 0, "the server's --event-segment-size (0: 4 MiB)")
	return f
}

// cmdVerify checks every file of a stopped server's data directory,
// changing nothing.
func cmdVerify(args []string, stdout, stderr io.Writer) int {
	f := newFsckFlags("verify", stderr)
	if err := f.fs.Parse(args); err != nil {
		return usageExit(err)
	}
	rep, err := broker.Verify(f.data, f.engine)
	if err != nil {
		fmt.Fprintf(stderr, "fibril verify: %v\n", err)
		return 1
	}
	if f.asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		printVerify(stdout, rep)
	}
	return verifyExit[rep.Worst()]
}

func printVerify(w io.Writer, rep broker.VerifyReport) {
	for _, fd := range rep.Findings {
		fmt.Fprintln(w, fd)
	}
	fmt.Fprintf(w, "verified %s: %d topics, %d partitions, %d segments, %d messages, %d bytes of records checked\n",
		rep.Dir, rep.Topics, rep.Partitions, rep.Segments, rep.Records, rep.Bytes)
	if len(rep.Findings) == 0 {
		fmt.Fprintln(w, "no damage found")
		return
	}
	fmt.Fprintf(w, "findings: %d catalog, %d records, %d state, %d orphan, %d notes\n",
		rep.Count(broker.FindingCatalog), rep.Count(broker.FindingRecords), rep.Count(broker.FindingState),
		rep.Count(broker.FindingOrphan), rep.Count(broker.FindingNote))
	if rep.Worst() > broker.FindingNote {
		fmt.Fprintf(w, "the server refuses to start on this directory (except for orphans); `fibril repair --data %s` quarantines the damage and lists what each group loses\n", rep.Dir)
	}
}

// cmdRepair repairs a stopped server's data directory: quarantines the
// damage, records what each group loses, and leaves a directory the server
// starts on.
func cmdRepair(args []string, stdout, stderr io.Writer) int {
	f := newFsckFlags("repair", stderr)
	adopt := f.fs.Bool("adopt", false, "take topic directories the catalog does not list back into it")
	if err := f.fs.Parse(args); err != nil {
		return usageExit(err)
	}
	rep, err := broker.Repair(f.data, broker.RepairOptions{Engine: f.engine, Adopt: *adopt})
	if f.asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		printRepair(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "fibril repair: %v\n", err)
		return 1
	}
	return 0
}

func printRepair(w io.Writer, rep broker.RepairReport) {
	if rep.Quarantine == "" {
		fmt.Fprintf(w, "nothing to repair in %s\n", rep.Before.Dir)
		for _, fd := range rep.Before.Findings {
			fmt.Fprintln(w, fd)
		}
		return
	}
	for _, a := range rep.Actions {
		fmt.Fprintln(w, a)
	}
	if len(rep.Losses) == 0 {
		fmt.Fprintln(w, "no group lost a message it had not settled")
	}
	for _, l := range rep.Losses {
		fmt.Fprintf(w, "lost: %s\n", l)
	}
	fmt.Fprintf(w, "repaired %s; copies of everything damaged or replaced and REPORT.json are in %s\n", rep.Before.Dir, rep.Quarantine)
}

func usageExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}
