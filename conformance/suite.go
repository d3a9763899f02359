package conformance

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

//go:embed scenarios/*.json known_failures.json
var scenarioFS embed.FS

// KnownFailures returns the scenarios the current server is known to fail,
// with the reason (conformance/known_failures.json). The table still shows
// them as FAIL; go test expects them to fail, and fails once they pass so
// that the entry is removed.
func KnownFailures() (map[string]string, error) {
	b, err := scenarioFS.ReadFile("known_failures.json")
	if err != nil {
		return nil, err
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("known_failures.json: %w", err)
	}
	return m, nil
}

// Scenarios returns the scenarios shipped in conformance/scenarios.
func Scenarios() ([]*Scenario, error) { return Load(scenarioFS, "scenarios") }

// Drivers returns the Go runners: raw wire and Go SDK.
func Drivers() []Driver { return []Driver{WireDriver{}, SDKDriver{}} }

// ReadInfo connects to addr and returns the server's INFO.
func ReadInfo(ctx context.Context, addr string) (map[string]any, error) {
	c, err := dialRaw(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.close()
	line, err := c.line(deadline(ctx))
	if err != nil {
		return nil, fmt.Errorf("reading INFO: %w", err)
	}
	js, ok := strings.CutPrefix(line, "INFO ")
	if !ok {
		return nil, fmt.Errorf("first line %q is not INFO", line)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(js), &info); err != nil {
		return nil, fmt.Errorf("INFO json: %w", err)
	}
	return info, nil
}

// Prefix returns a fresh ${T} for one run of one scenario by one runner.
func Prefix(runner, scenario string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, scenario)
	return fmt.Sprintf("cf.%s.%s.%s", runner, clean, hex.EncodeToString(b[:]))
}

// Status is the outcome of one scenario with one runner.
type Status string

// The statuses.
const (
	Pass Status = "pass"
	Fail Status = "FAIL"
	Skip Status = "skip"
)

// Result is one cell of the table. As JSON (one object per line) it is the
// format every runner writes so that its results join the same table:
// {"scenario":"publish-confirm","runner":"py-sdk","status":"pass","detail":""}.
type Result struct {
	Scenario string        `json:"scenario"`
	Runner   string        `json:"runner"`
	Status   Status        `json:"status"` // pass | FAIL | skip
	Detail   string        `json:"detail,omitempty"`
	Elapsed  time.Duration `json:"elapsed_ns,omitempty"`
}

// WriteResults writes results as JSON lines.
func WriteResults(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// ReadResults reads JSON-lines results written by any runner.
func ReadResults(r io.Reader) ([]Result, error) {
	dec := json.NewDecoder(r)
	var out []Result
	for dec.More() {
		var res Result
		if err := dec.Decode(&res); err != nil {
			return out, fmt.Errorf("results line %d: %w", len(out)+1, err)
		}
		switch res.Status {
		case Pass, Fail, Skip:
		default:
			return out, fmt.Errorf("results line %d: status %q is not pass, FAIL or skip", len(out)+1, res.Status)
		}
		out = append(out, res)
	}
	return out, nil
}

// RunOne runs one scenario with one driver. Scenarios whose required
// features env lacks are reported as failing (the table shows what the
// server cannot do yet); callers that must stay green (go test) check
// env.Missing first and skip.
func RunOne(ctx context.Context, sc *Scenario, d Driver, env *Env) Result {
	res := Result{Scenario: sc.Name, Runner: d.Name()}
	if why := NotApplicable(sc, d); why != "" {
		res.Status, res.Detail = Skip, why
		return res
	}
	if sc.Cluster > 0 {
		if env.Cluster == nil {
			res.Status, res.Detail = Fail, fmt.Sprintf("runner cannot start a cluster of %d", sc.Cluster)
			return res
		}
		cenv, stop, err := env.Cluster(ctx, sc.Cluster)
		if err != nil {
			res.Status, res.Detail = Fail, fmt.Sprintf("starting a cluster of %d: %v", sc.Cluster, err)
			return res
		}
		defer stop()
		env = cenv
	}
	if miss := env.Missing(sc); len(miss) > 0 {
		res.Status, res.Detail = Fail, "server/runner lacks "+strings.Join(miss, ", ")
		return res
	}
	start := time.Now()
	err := Run(ctx, sc, d, env, Prefix(d.Name(), sc.Name))
	res.Elapsed = time.Since(start)
	if err != nil {
		res.Status, res.Detail = Fail, err.Error()
	} else {
		res.Status = Pass
	}
	return res
}

// NotApplicable says why driver d cannot run sc at all ("" when it can): a
// cluster scenario needs a driver whose sessions fail over by themselves.
func NotApplicable(sc *Scenario, d Driver) string {
	if sc.Cluster == 0 {
		return ""
	}
	if f, ok := d.(FailoverDriver); ok && f.Failover() {
		return ""
	}
	return "not applicable: the " + d.Name() + " runner does not fail over to another node"
}

// RunAll runs every scenario with every driver, parallel scenarios at a
// time, then the scenarios that restart the server, and the cluster ones
// (each on a cluster of its own from env.Cluster), one by one against
// restartEnv (a server of their own, so that its restart does not depend on
// how many topics the other scenarios left behind; nil means env).
func RunAll(ctx context.Context, scs []*Scenario, drivers []Driver, env, restartEnv *Env, parallel int) []Result {
	if restartEnv == nil {
		restartEnv = env
	}
	parallel = max(parallel, 1)
	type job struct {
		i  int
		sc *Scenario
		d  Driver
	}
	var serial, par []job
	n := 0
	for _, sc := range scs {
		for _, d := range drivers {
			j := job{n, sc, d}
			n++
			if slices.Contains(sc.Requires, "restart") || sc.Cluster > 0 {
				serial = append(serial, j)
			} else {
				par = append(par, j)
			}
		}
	}
	out := make([]Result, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for _, j := range par {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[j.i] = RunOne(ctx, j.sc, j.d, env)
		}()
	}
	wg.Wait()
	for _, j := range serial {
		out[j.i] = RunOne(ctx, j.sc, j.d, restartEnv)
	}
	return out
}

// PrintTable writes the scenario × runner table, then the failures with
// their reasons, and returns how many cells failed.
func PrintTable(w io.Writer, results []Result) int {
	var runners, names []string
	cell := map[[2]string]Result{}
	for _, r := range results {
		if !slices.Contains(runners, r.Runner) {
			runners = append(runners, r.Runner)
		}
		if !slices.Contains(names, r.Scenario) {
			names = append(names, r.Scenario)
		}
		cell[[2]string{r.Scenario, r.Runner}] = r
	}
	width := len("scenario")
	for _, n := range names {
		width = max(width, len(n))
	}
	fmt.Fprintf(w, "%-*s", width, "scenario")
	for _, r := range runners {
		fmt.Fprintf(w, "  %-8s", r)
	}
	fmt.Fprintln(w)
	fails := 0
	counts := map[string]int{}
	for _, n := range names {
		fmt.Fprintf(w, "%-*s", width, n)
		for _, r := range runners {
			res, ok := cell[[2]string{n, r}]
			st := "-"
			if ok {
				st = string(res.Status)
				if res.Status == Fail {
					fails++
				} else if res.Status == Pass {
					counts[r]++
				}
			}
			fmt.Fprintf(w, "  %-8s", st)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%-*s", width, "passed")
	for _, r := range runners {
		fmt.Fprintf(w, "  %-8s", fmt.Sprintf("%d/%d", counts[r], len(names)))
	}
	fmt.Fprintln(w)
	if fails > 0 {
		fmt.Fprintln(w, "\nfailures (conformance/known_failures.json lists known server bugs):")
		for _, r := range results {
			if r.Status == Fail {
				fmt.Fprintf(w, "  %s [%s]: %s\n", r.Scenario, r.Runner, r.Detail)
			}
		}
	}
	return fails
}
