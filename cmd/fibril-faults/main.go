// Command fibril-faults is the long form of the single-node fault runs
// (internal/faultrun, FAULTS.md): it runs `fibril serve` under kills,
// pauses past the lease, clock steps and power cuts for -duration, -runs
// times (run i uses seed -seed+i), judges each history, and prints one
// line per run and a Markdown table of all of them.
//
//	fibril-faults -duration 60s -runs 10 -seed 1 -faults kill,pause,clock-forward,clock-back,powercut
//	fibril-faults -netns -faults isolate,kill,powercut   # node and clients in namespaces
//	fibril-faults -nodes 3 -duration 60s -runs 10       # a 3-node cluster in namespaces, every kind
//
// A failing run's history and node log are kept in -keep with its seed in
// the name. Exit codes: 0 every run valid, 1 a run invalid or failed, 2 bad
// usage.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/fibrilmq/fibril/conformance/fibrilproc"
	"github.com/fibrilmq/fibril/internal/faultrun"
	"github.com/fibrilmq/fibril/internal/history"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fibril-faults", flag.ContinueOnError)
	fs.SetOutput(stderr)
	duration := fs.Duration("duration", 60*time.Second, "fault phase of each run")
	runs := fs.Int("runs", 1, "number of runs")
	seed := fs.Uint64("seed", 0, "seed of the first run (0: from the time)")
	kinds := fs.String("faults", "", "fault kinds, comma-separated (default: kill,pause,clock-forward,clock-back,powercut,fsync-eio; with -nodes 3 or 5 also kill-leader,pause-leader,powercut-leader,isolate,split,bridge,delay,loss,duplicate; also: enospc; isolate with -netns)")
	nodes := fs.Int("nodes", 1, "1: one node; 3 or 5: a cluster, each node in its own network namespace (root)")
	bin := fs.String("bin", "", "fibril binary (default: build ./cmd/fibril)")
	keep := fs.String("keep", os.TempDir(), "directory for the histories of failing runs")
	verbose := fs.Bool("v", false, "log each fault")
	inNetns := fs.Bool("netns", false, "run the node and the clients in network namespaces of their own (root; makes isolate usable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *runs < 1 || *duration <= 0 || (*nodes != 1 && *nodes != 3 && *nodes != 5) || (*nodes > 1 && *inNetns) {
		fmt.Fprintln(stderr, "usage: fibril-faults [-nodes 1|3|5] [-duration 60s] [-runs n] [-seed n] [-faults kinds] [-bin path] [-keep dir] [-netns (one node)]")
		return 2
	}
	faults := faultrun.DefaultFaults()
	if *nodes > 1 {
		faults = faultrun.ClusterFaults()
	}
	if *kinds != "" {
		var err error
		if faults, err = faultrun.FaultsByName(strings.Split(*kinds, ",")); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	work, err := os.MkdirTemp("", "fibril-faults")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer os.RemoveAll(work)
	if *bin == "" {
		if *bin, err = fibrilproc.Build(ctx, work); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	logf := func(string, ...any) {}
	if *verbose {
		logf = func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }
	}
	var rows []string
	code := 0
	for i := range *runs {
		s := *seed + uint64(i)
		dir, err := os.MkdirTemp(work, "run")
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		cfg := faultrun.Config{Bin: *bin, Dir: dir, Seed: s, Duration: *duration, Faults: faults, KeepDir: *keep, Logf: logf}
		var ns interface{ Close() error }
		if *nodes > 1 {
			c, err := faultrun.NewCluster(fmt.Sprintf("fc%d", i%1000000), *bin, *nodes)
			if err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
			if !c.Netem() {
				logf("netem kinds left out: this kernel has no sch_netem")
			}
			ns, cfg.StartNodes, cfg.Within, cfg.Replicated = c, c.StartNodes, c.Within, true
		} else if *inNetns {
			n, err := faultrun.NewNamespaces(fmt.Sprintf("ff%d", i%1000000), *bin)
			if err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
			ns, cfg.StartNodes, cfg.Within = n, n.StartNodes, n.Within
		}
		rep, err := faultrun.Run(ctx, cfg)
		if ns != nil {
			if cerr := ns.Close(); cerr != nil {
				fmt.Fprintln(stderr, cerr)
			}
		}
		if err != nil {
			fmt.Fprintf(stdout, "run %d seed %d: FAILED: %v\n", i+1, s, err)
			code = 1
			if ctx.Err() != nil {
				break
			}
			continue
		}
		r := rep.Result
		fmt.Fprintf(stdout, "run %d seed %d %s: %s\n", i+1, s, rep.Elapsed.Round(time.Second), r.Summary())
		if !r.Valid() {
			code = 1
			fmt.Fprintf(stdout, "  history kept: %s (replay: make faults NODES=%d SEED=%d DURATION=%s)\n", rep.History, *nodes, s, *duration)
			_ = r.WriteTable(stdout)
		}
		rows = append(rows, row(i+1, s, *duration, rep))
		_ = os.RemoveAll(dir)
	}
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, "| run | seed | fault phase | faults injected | confirmed | acked | dead-lettered |")
	for _, c := range history.Categories() {
		fmt.Fprintf(stdout, " %s |", c)
	}
	fmt.Fprintln(stdout, " verdict |")
	fmt.Fprint(stdout, "|---|---|---|---|---|---|---|")
	for range history.Categories() {
		fmt.Fprint(stdout, "---|")
	}
	fmt.Fprintln(stdout, "---|")
	for _, r := range rows {
		fmt.Fprintln(stdout, r)
	}
	return code
}

// row is one run as a Markdown table row.
func row(i int, seed uint64, d time.Duration, rep *faultrun.Report) string {
	r := rep.Result
	counts := map[string]int{}
	for _, k := range rep.Injected {
		counts[k]++
	}
	var inj []string
	for _, k := range []string{"kill", "pause", "clock-forward", "clock-back", "powercut", "fsync-eio", "enospc", "isolate",
		"kill-leader", "pause-leader", "powercut-leader", "split", "bridge", "delay", "loss", "duplicate"} {
		if counts[k] > 0 {
			inj = append(inj, fmt.Sprintf("%s %d", k, counts[k]))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| %d | %d | %s | %s | %d | %d | %d |", i, seed, d, strings.Join(inj, ", "), r.Confirmed, r.Acked, r.DeadLettered)
	for _, c := range r.Counts {
		fmt.Fprintf(&b, " %d |", c.N)
	}
	verdict := "valid"
	if !r.Valid() {
		verdict = "**INVALID**"
	}
	fmt.Fprintf(&b, " %s |", verdict)
	return b.String()
}
