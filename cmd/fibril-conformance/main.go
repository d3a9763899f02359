// Command fibril-conformance runs the conformance scenarios
// (conformance/scenarios) against a Fibril server with every Go runner and
// prints a table of scenario × runner, pass or FAIL, followed by the reasons.
//
//	go run ./cmd/fibril-conformance                 # builds and starts ./cmd/fibril
//	go run ./cmd/fibril-conformance -url 127.0.0.1:4222
//	go run ./cmd/fibril-conformance -run 'crc|dead' -runners wire
//	go run ./cmd/fibril-conformance -json go.jsonl -merge py.jsonl,js.jsonl
//	go run ./cmd/fibril-conformance -merge py.jsonl,js.jsonl -complete -allow-known
//
// It exits 1 when any cell fails. Scenarios that need a feature the server
// does not advertise (or a restart, with -url) are listed as failing, with
// the missing feature as the reason. With -allow-known, failures of
// scenarios in conformance/known_failures.json do not count for the exit
// status (they still show as FAIL); with -complete, a runner of a merged file
// that has no result for a selected scenario counts as a failure (a runner
// that crashed part-way must not pass).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/fibrilmq/fibril/conformance"
	"github.com/fibrilmq/fibril/conformance/fibrilproc"
)

func main() { os.Exit(run()) }

func run() int {
	url := flag.String("url", "", "host:port of a running server (default: build and start ./cmd/fibril)")
	bin := flag.String("bin", "", "fibril binary to start (default: $FIBRIL_BIN or go build ./cmd/fibril)")
	filter := flag.String("run", "", "only scenarios whose name matches this regular expression")
	runners := flag.String("runners", "wire,go-sdk", "comma-separated runners")
	parallel := flag.Int("parallel", 8, "scenarios run at once (restart scenarios always run alone)")
	timeout := flag.Duration("timeout", 10*time.Minute, "overall time limit")
	jsonOut := flag.String("json", "", "also write the results as JSON lines to this file")
	merge := flag.String("merge", "", "comma-separated JSON-lines result files of other runners (Python, JS) to add to the table")
	allowKnown := flag.Bool("allow-known", false, "failures listed in conformance/known_failures.json do not fail the exit status")
	complete := flag.Bool("complete", false, "every runner of a merged file must have a result for every selected scenario")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	scs, err := conformance.Scenarios()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if *filter != "" {
		re, err := regexp.Compile(*filter)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		scs = slices.DeleteFunc(scs, func(s *conformance.Scenario) bool { return !re.MatchString(s.Name) })
	}
	var drivers []conformance.Driver
	for _, d := range conformance.Drivers() {
		if slices.Contains(strings.Split(*runners, ","), d.Name()) {
			drivers = append(drivers, d)
		}
	}
	env := &conformance.Env{Addr: *url}
	var restartEnv *conformance.Env
	if *url == "" {
		dir, err := os.MkdirTemp("", "fibril-conformance-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer os.RemoveAll(dir)
		if *bin == "" {
			if *bin, err = fibrilproc.Build(ctx, dir); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
		}
		// one server for most scenarios, a second one that the restart
		// scenarios restart
		srv, err := fibrilproc.Start(ctx, *bin, dir+"/data")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer srv.Stop(false)
		rsrv, err := fibrilproc.Start(ctx, *bin, dir+"/data-restart")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer rsrv.Stop(false)
		env.Addr = srv.Addr
		restartEnv = &conformance.Env{Addr: rsrv.Addr, Restart: func(ctx context.Context) error {
			err := rsrv.Restart(ctx, true)
			fmt.Printf("server restarted (SIGKILL) in %v\n", rsrv.RestartTook.Round(time.Millisecond))
			return err
		}}
		env.Cluster = conformance.ClusterStarter(*bin, dir)
		restartEnv.Cluster = env.Cluster
		fmt.Printf("started %s on %s (and %s for restarts)\n", *bin, srv.Addr, rsrv.Addr)
	}
	if env.Info, err = conformance.ReadInfo(ctx, env.Addr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if restartEnv != nil {
		if restartEnv.Info, err = conformance.ReadInfo(ctx, restartEnv.Addr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	start := time.Now()
	results := conformance.RunAll(ctx, scs, drivers, env, restartEnv, *parallel)
	if *jsonOut != "" {
		f, err := os.Create(*jsonOut)
		if err == nil {
			err = conformance.WriteResults(f, results)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	for _, path := range strings.Split(*merge, ",") {
		if path == "" {
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		more, err := conformance.ReadResults(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			return 2
		}
		if *complete && len(more) == 0 {
			fmt.Fprintf(os.Stderr, "%s: no results (did the runner start?)\n", path)
			return 1
		}
		if *complete {
			more = append(more, missingResults(scs, more)...)
		}
		results = append(results, more...)
	}
	fails := conformance.PrintTable(os.Stdout, results)
	var names []string
	for _, r := range results {
		if !slices.Contains(names, r.Runner) {
			names = append(names, r.Runner)
		}
	}
	fmt.Printf("\n%d scenarios × %d runners (%s) in %v, %d failed\n", len(scs), len(names), strings.Join(names, ", "), time.Since(start).Round(time.Millisecond), fails)
	if *allowKnown && fails > 0 {
		known, err := conformance.KnownFailures()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fails = 0
		for _, r := range results {
			if _, ok := known[r.Scenario]; r.Status == conformance.Fail && !ok {
				fails++
			}
		}
		fmt.Printf("%d unexpected (not in known_failures.json)\n", fails)
	}
	if fails > 0 {
		return 1
	}
	return 0
}

// missingResults returns a failing result for every selected scenario that
// a runner named in results has no result for.
func missingResults(scs []*conformance.Scenario, results []conformance.Result) []conformance.Result {
	seen := map[[2]string]bool{}
	var runners []string
	for _, r := range results {
		seen[[2]string{r.Runner, r.Scenario}] = true
		if !slices.Contains(runners, r.Runner) {
			runners = append(runners, r.Runner)
		}
	}
	var out []conformance.Result
	for _, runner := range runners {
		for _, sc := range scs {
			if !seen[[2]string{runner, sc.Name}] {
				out = append(out, conformance.Result{Scenario: sc.Name, Runner: runner, Status: conformance.Fail, Detail: "no result from this runner"})
			}
		}
	}
	return out
}
