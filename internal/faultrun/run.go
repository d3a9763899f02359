package faultrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"

	"github.com/fibrilmq/fibril/internal/faultfs"
	"github.com/fibrilmq/fibril/internal/history"
	"github.com/fibrilmq/fibril/protocol"
)

// Config describes one run. Zero values mean the defaults.
type Config struct {
	Bin      string        // the fibril binary (required)
	Dir      string        // work directory: nodes' data and the history (required)
	Seed     uint64        // draws the fault schedule and the consumers' choices
	Duration time.Duration // the fault phase (default 20s)
	// Faults are the kinds drawn from, in turns (every kind once, in a
	// seeded order, then again); default DefaultFaults. Kinds a node cannot
	// do (PowerCut without FUSE) are left out.
	Faults     []Fault
	Producers  int           // default 2
	Consumers  int           // default 2
	Partitions int           // default 2
	Lease      time.Duration // the group's lease (default 2s)
	// QuietMin and QuietMax bound the pause between faults (default 0.5s
	// and 2s).
	QuietMin, QuietMax time.Duration
	// DrainTimeout bounds the final drain (default 60s); a drain that does
	// not finish leaves the history incomplete, and the run invalid.
	DrainTimeout time.Duration
	// KeepDir receives the history and node logs of a failing run
	// (default Dir).
	KeepDir string
	// Logf reports progress (default: nothing).
	Logf func(format string, args ...any)
	// StartNodes starts the run's nodes under dir, with power cuts
	// possible when powerCut is set (default: one ProcNode of Bin). A
	// cluster harness supplies its own; clients spread over the nodes and
	// each fault picks one.
	StartNodes func(ctx context.Context, dir string, powerCut bool) ([]Node, error)
	// LeasesSurviveRestart is passed to the checker (history.Config).
	LeasesSurviveRestart bool
	// Replicated says the nodes are one cluster (a Cluster's): leases
	// survive restarts (they are replicated), an answer -ERR not_leader
	// leaves the outcome unknown (SPEC.md 11.2: what was in flight on the
	// old leader may be committed), publishes carry their value as
	// message id (the SDK resends a publish answered not_leader, so a
	// value stored twice is the broker's doing), and a clock step sends
	// every node's clock past the leases in the drain (any node may
	// inherit a lease granted by a stepped one).
	Replicated bool
	// Within runs each client dial (nil: in this process's network), e.g.
	// a netns.Node's Do when the nodes live in namespaces.
	Within func(func() error) error
}

func (c Config) withDefaults() (Config, error) {
	if c.Bin == "" || c.Dir == "" {
		return c, errors.New("faultrun: Config.Bin and Config.Dir are required")
	}
	def := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	defInt := func(p *int, d int) {
		if *p == 0 {
			*p = d
		}
	}
	def(&c.Duration, 20*time.Second)
	def(&c.Lease, 2*time.Second)
	def(&c.QuietMin, 500*time.Millisecond)
	def(&c.QuietMax, 2*time.Second)
	def(&c.DrainTimeout, 60*time.Second)
	defInt(&c.Producers, 2)
	defInt(&c.Consumers, 2)
	defInt(&c.Partitions, 2)
	if c.Faults == nil {
		c.Faults = DefaultFaults()
	}
	if c.KeepDir == "" {
		c.KeepDir = c.Dir
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.StartNodes == nil {
		bin := c.Bin
		c.StartNodes = func(ctx context.Context, dir string, powerCut bool) ([]Node, error) {
			n, err := StartProcNode(ctx, "n1", bin, filepath.Join(dir, "n1"), powerCut)
			if err != nil {
				return nil, err
			}
			return []Node{n}, nil
		}
	}
	if c.QuietMax < c.QuietMin {
		return c, fmt.Errorf("faultrun: QuietMax %v < QuietMin %v", c.QuietMax, c.QuietMin)
	}
	return c, nil
}

// Report is a run's outcome.
type Report struct {
	Seed     uint64
	Result   *history.Result
	Injected []string // fault kinds in the order injected
	// History is the history file; for a failing run it is under KeepDir
	// and stays, with the node logs next to it.
	History string
	Elapsed time.Duration
}

// Names of the run's topic and groups.
const (
	Topic    = "faults"
	Group    = "g"
	DLQGroup = "dlq"
)

// Run performs one run: start the nodes, run the workload under faults for
// Duration, heal, drain, check. It returns an error only when the run
// could not be carried out (a node would not start); a broken promise is
// in Report.Result.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &Report{Seed: cfg.Seed}
	powerCut := false
	for _, f := range cfg.Faults {
		if f.Disk() && !powerCut {
			if err := faultfs.Available(); err != nil {
				cfg.Logf("disk faults left out: %v", err)
				break
			}
			powerCut = true
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	nodes, err := cfg.StartNodes(sctx, cfg.Dir, powerCut)
	cancel()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, n := range nodes {
			_ = n.Close()
		}
	}()
	var faults []Fault
	for _, f := range cfg.Faults {
		usable := true
		for _, n := range nodes {
			usable = usable && f.Usable(n)
		}
		if usable {
			faults = append(faults, f)
		}
	}
	var next atomic.Uint64
	url := func() string { return nodes[next.Add(1)%uint64(len(nodes))].URL() }
	dlq := protocol.DeadLetterTopic(Topic, Group)
	if err := setupRetrying(ctx, url, cfg, dlq); err != nil {
		return nil, err
	}
	hpath := filepath.Join(cfg.Dir, "history.jsonl")
	h, err := history.Create(hpath)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	_ = h.Add(history.Op{Kind: history.Phase, Proc: -1, Value: history.PhaseStart, Seed: cfg.Seed, DeadLetter: dlq,
		Outcome: history.OK, Invoke: now(), Complete: now()})
	w := &workload{h: h, url: url, within: cfg.Within, topic: Topic, leaseMs: cfg.Lease.Milliseconds(), replicated: cfg.Replicated}

	// The fault phase: workers until it ends, faults in turns meanwhile.
	fctx, fcancel := context.WithTimeout(ctx, cfg.Duration)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runAll(cfg.Producers+cfg.Consumers+1, func(i int) {
			switch {
			case i < cfg.Producers:
				w.produce(fctx, i+1)
			case i < cfg.Producers+cfg.Consumers:
				w.consume(fctx, i+1, Topic, Group, rand.New(rand.NewPCG(cfg.Seed, uint64(100+i))), 0)
			default:
				w.consume(fctx, i+1, dlq, DLQGroup, rand.New(rand.NewPCG(cfg.Seed, uint64(100+i))), 0)
			}
		})
	}()
	clocked, ferr := schedule(fctx, cfg, nodes, faults, h, rep)
	fcancel()
	wg.Wait()
	if ferr != nil {
		_ = h.Close()
		rep.History = keep(cfg, hpath, nodes)
		return rep, ferr
	}

	// The final drain: faults healed, everything left is delivered and acked.
	_ = h.Add(history.Op{Kind: history.Phase, Proc: -1, Value: history.PhaseDrain, Outcome: history.OK, Invoke: now(), Complete: now()})
	if cfg.Replicated && len(clocked) > 0 {
		clocked = nodes
	}
	for _, node := range clocked {
		// Leases and delays granted under a stepped clock end by the
		// node's clock: run it past all of them.
		op := faultOp(history.FaultClock)
		op.OffsetMs = (3 * time.Hour).Milliseconds()
		if err := record(h, node, op, func() error { return node.SetClock(3 * time.Hour) }); err != nil {
			return rep, err
		}
	}
	dctx, dcancel := context.WithTimeout(ctx, cfg.DrainTimeout)
	quiet := cfg.Lease + 1500*time.Millisecond
	runAll(2, func(i int) {
		if i == 0 {
			w.consume(dctx, 200, Topic, Group, nil, quiet)
		} else {
			w.consume(dctx, 201, dlq, DLQGroup, nil, quiet)
		}
	})
	drained := dctx.Err() == nil
	dcancel()
	if ctx.Err() != nil {
		return rep, fmt.Errorf("faultrun: interrupted: %w", ctx.Err())
	}
	if drained {
		_ = h.Add(history.Op{Kind: history.Phase, Proc: -1, Value: history.PhaseDone, Outcome: history.OK, Invoke: now(), Complete: now()})
	}
	if err := h.Close(); err != nil {
		return rep, err
	}
	ops, err := history.ReadFile(hpath)
	if err != nil {
		return rep, err
	}
	rep.Result = history.Check(ops, history.Config{DeadLetterTopic: dlq, LeasesSurviveRestart: cfg.LeasesSurviveRestart || cfg.Replicated})
	rep.History = hpath
	if !rep.Result.Valid() {
		rep.History = keep(cfg, hpath, nodes)
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// setupRetrying runs setup on the nodes in turn until it succeeds or 30 s
// pass (a fresh cluster answers not_leader until it elected its metadata
// leader; the same create again is +OK once applied).
func setupRetrying(ctx context.Context, url func() string, cfg Config, dlq string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := setup(ctx, url(), cfg, dlq, cfg.Within)
		if err == nil || !cfg.Replicated || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// setup creates the topic, its group and the dead-letter group.
func setup(ctx context.Context, url string, cfg Config, dlq string, within func(func() error) error) error {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var c *fibril.Conn
	err := dialWithin(within, func() (err error) { c, err = fibril.Connect(sctx, url); return err })
	if err != nil {
		return fmt.Errorf("faultrun: setup: %w", err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(sctx, Topic, fibril.TopicConfig{Partitions: cfg.Partitions}); err != nil {
		return fmt.Errorf("faultrun: setup: %w", err)
	}
	if _, err := c.CreateGroup(sctx, Topic, Group, fibril.GroupConfig{LeaseMs: cfg.Lease.Milliseconds(), MaxDeliveries: 5}); err != nil {
		return fmt.Errorf("faultrun: setup: %w", err)
	}
	if _, err := c.CreateGroup(sctx, dlq, DLQGroup, fibril.GroupConfig{Start: "earliest", LeaseMs: cfg.Lease.Milliseconds()}); err != nil {
		return fmt.Errorf("faultrun: setup: %w", err)
	}
	return nil
}

// schedule injects faults in turns until ctx ends, each on a node drawn
// from the seed, held, then healed. It returns the nodes whose clock was
// stepped.
func schedule(ctx context.Context, cfg Config, nodes []Node, faults []Fault, h *history.Writer, rep *Report) (clocked []Node, err error) {
	if len(faults) == 0 {
		<-ctx.Done()
		return nil, nil
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	var turn []Fault
	for {
		quiet := cfg.QuietMin + time.Duration(rng.Int64N(int64(cfg.QuietMax-cfg.QuietMin)+1))
		select {
		case <-ctx.Done():
			return clocked, nil
		case <-time.After(quiet):
		}
		if len(turn) == 0 {
			turn = append(turn, faults...)
			rng.Shuffle(len(turn), func(i, j int) { turn[i], turn[j] = turn[j], turn[i] })
		}
		f := turn[0]
		turn = turn[1:]
		n := nodes[0]
		if len(nodes) > 1 { // no draw for one node: single-node seeds replay as before
			n = nodes[rng.IntN(len(nodes))]
			if p, ok := f.(picker); ok {
				n = p.pick(n)
			}
		}
		hold := f.Hold(rng, cfg.Lease)
		if _, ok := f.(ClockStep); ok && !slices.Contains(clocked, n) {
			clocked = append(clocked, n)
		}
		rep.Injected = append(rep.Injected, f.Name())
		cfg.Logf("fault %s on %s for %v", f.Name(), n.Name(), hold)
		// Inject and heal run to completion even when the phase ends
		// meanwhile: a fault is never left unhealed.
		bg := context.WithoutCancel(ctx)
		if err := recordF(h, n, func() (history.Op, error) { return f.Inject(bg, n) }); err != nil {
			return clocked, fmt.Errorf("faultrun: injecting %s: %w", f.Name(), err)
		}
		time.Sleep(hold)
		hctx, cancel := context.WithTimeout(bg, 30*time.Second)
		err := recordF(h, n, func() (history.Op, error) { return f.Heal(hctx, n) })
		cancel()
		if err != nil {
			return clocked, fmt.Errorf("faultrun: healing %s: %w", f.Name(), err)
		}
	}
}

// recordF runs a fault step and records it with its times and node.
func recordF(h *history.Writer, n Node, step func() (history.Op, error)) error {
	inv := now()
	op, err := step()
	op.Kind, op.Proc, op.Node, op.Invoke, op.Complete, op.Outcome = history.Fault, -1, n.Name(), inv, now(), history.OK
	if err != nil {
		op.Outcome, op.Err = history.Info, err.Error()
	}
	_ = h.Add(op)
	return err
}

func record(h *history.Writer, n Node, op history.Op, f func() error) error {
	return recordF(h, n, func() (history.Op, error) { return op, f() })
}

// keep copies a failing run's history (and the nodes' logs) into KeepDir
// under a name with the seed, and returns the history's new path.
func keep(cfg Config, hpath string, nodes []Node) string {
	if err := os.MkdirAll(cfg.KeepDir, 0o755); err != nil {
		return hpath
	}
	base := filepath.Join(cfg.KeepDir, fmt.Sprintf("faults-seed%d-%s", cfg.Seed, time.Now().UTC().Format("20060102T150405")))
	dst := base + ".jsonl"
	if err := copyFile(hpath, dst); err != nil {
		return hpath
	}
	for _, n := range nodes {
		_ = os.WriteFile(base+"."+n.Name()+".log", []byte(n.Logs()), 0o644)
	}
	return dst
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
