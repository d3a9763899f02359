package conformance_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/conformance"
	"github.com/fibrilmq/fibril/conformance/fibrilproc"
)

var (
	binPath  string             // the fibril binary, for cluster scenarios
	tmpDir   string             // where cluster scenarios put their nodes
	server   *fibrilproc.Server // most scenarios
	rserver  *fibrilproc.Server // scenarios that restart the server
	startErr error
)

// TestMain builds ./cmd/fibril once (or takes FIBRIL_BIN) and starts it on
// 127.0.0.1 port 0 with a temporary data directory.
func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "fibril-conformance-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		bin, err := fibrilproc.Build(ctx, dir)
		binPath, tmpDir = bin, dir
		if err == nil {
			server, err = fibrilproc.Start(ctx, bin, dir+"/data")
		}
		if err == nil {
			rserver, err = fibrilproc.Start(ctx, bin, dir+"/data-restart")
		}
		if err != nil {
			startErr = err
		}
		defer func() {
			for _, s := range []*fibrilproc.Server{server, rserver} {
				if s != nil {
					s.Stop(false)
				}
			}
		}()
		return m.Run()
	}())
}

func TestScenarioFiles(t *testing.T) {
	scs, err := conformance.Scenarios()
	if err != nil {
		t.Fatal(err)
	}
	known, err := conformance.KnownFailures()
	if err != nil {
		t.Fatal(err)
	}
	for name := range known {
		if !slices.ContainsFunc(scs, func(s *conformance.Scenario) bool { return s.Name == name }) {
			t.Errorf("known_failures.json names %q, which is no scenario", name)
		}
	}
	if len(scs) < 40 {
		t.Fatalf("%d scenarios, want at least 40", len(scs))
	}
	for _, sc := range scs {
		for i, st := range sc.Steps {
			if st.Op == "restart_server" && !slices.Contains(sc.Requires, "restart") {
				t.Errorf("%s step %d: restart_server without requires restart", sc.Name, i+1)
			}
		}
	}
}

// TestScenarios runs every scenario with the raw-wire and Go SDK runners.
// A scenario whose required feature the server does not advertise is
// skipped with the reason; every other one must pass.
func TestScenarios(t *testing.T) {
	if startErr != nil {
		t.Fatalf("starting the server: %v", startErr)
	}
	scs, err := conformance.Scenarios()
	if err != nil {
		t.Fatal(err)
	}
	known, err := conformance.KnownFailures()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	info, err := conformance.ReadInfo(ctx, server.Addr)
	if err != nil {
		t.Fatal(err)
	}
	env := &conformance.Env{Addr: server.Addr, Info: info}
	rinfo, err := conformance.ReadInfo(ctx, rserver.Addr)
	if err != nil {
		t.Fatal(err)
	}
	renv := &conformance.Env{Addr: rserver.Addr, Info: rinfo, Restart: func(ctx context.Context) error {
		return rserver.Restart(ctx, true)
	}}
	clusterOf := conformance.ClusterStarter(binPath, tmpDir)
	envOf := func(sc *conformance.Scenario) *conformance.Env {
		if slices.Contains(sc.Requires, "restart") {
			return renv
		}
		return env
	}
	// Run the scenarios 8 at a time (they mostly wait on the server's
	// timers; go test would run only GOMAXPROCS parallel subtests), the
	// restart ones alone at the end, then report each as a subtest.
	type cell struct {
		sc   *conformance.Scenario
		d    conformance.Driver
		miss []string
		na   string // not applicable to this runner
		err  error
	}
	var cells []*cell
	for _, d := range conformance.Drivers() {
		for _, sc := range scs {
			cells = append(cells, &cell{sc: sc, d: d, miss: envOf(sc).Missing(sc), na: conformance.NotApplicable(sc, d)})
		}
	}
	exec := func(c *cell) {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		env := envOf(c.sc)
		if c.sc.Cluster > 0 {
			cenv, stop, err := clusterOf(ctx, c.sc.Cluster)
			if err != nil {
				c.err = err
				return
			}
			defer stop()
			env = cenv
		}
		c.err = conformance.Run(ctx, c.sc, c.d, env, conformance.Prefix(c.d.Name(), c.sc.Name))
	}
	serial := func(c *cell) bool { return slices.Contains(c.sc.Requires, "restart") || c.sc.Cluster > 0 }
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, c := range cells {
		if len(c.miss) > 0 || c.na != "" || serial(c) {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			exec(c)
		}()
	}
	wg.Wait()
	for _, c := range cells {
		if len(c.miss) == 0 && c.na == "" && serial(c) {
			exec(c)
		}
	}
	for _, c := range cells {
		t.Run(c.d.Name()+"/"+c.sc.Name, func(t *testing.T) {
			if c.na != "" {
				t.Skip(c.na)
			}
			if len(c.miss) > 0 {
				t.Skipf("server does not advertise %s", strings.Join(c.miss, ", "))
			}
			why, isKnown := known[c.sc.Name]
			switch {
			case isKnown && strings.HasPrefix(why, "flaky:"):
				t.Logf("known flaky server behaviour (%s): err = %v", why, c.err)
			case isKnown && c.err == nil:
				t.Errorf("%s passes now: remove it from known_failures.json (%s)", c.sc.File, why)
			case isKnown:
				t.Logf("known server failure (%s): %v", why, c.err)
			case c.err != nil:
				t.Errorf("%s: %v", c.sc.File, c.err)
			}
		})
	}
}
