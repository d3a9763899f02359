package clusterkill

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/internal/history"
)

// Config is one run.
type Config struct {
	Bin string // the fibril binary
	Dir string // where the nodes' data, the certificates and the history go
	// Nodes is the cluster's size, 3 (default) or 5.
	Nodes int
	// Partitions of the topic (default 1). Cycle i kills the leader of
	// partition i % Partitions.
	Partitions int
	// Cycles is how many leaders are killed (and restarted).
	Cycles int
	// Window is the publisher's unconfirmed publishes at most (default 16).
	Window int
	// Rate bounds the publisher (messages per second; 0: as fast as the
	// confirms come).
	Rate float64
	// LeaseMs is the group's lease (default 5000).
	LeaseMs int64
	// Dwell is how long the load runs after a restart before the next
	// kill (default 1 s): time for the restarted node to catch up.
	Dwell time.Duration
	// HangAfter is how long a kill may leave the partition without
	// service (no confirm or no delivery) before the run fails as hung
	// (default 30 s). It is a bound on a hang, not a speed check.
	HangAfter time.Duration
	// Victim is the node each cycle stops (default Leader: the leader of
	// partition i % Partitions).
	Victim Victim
	// Graceful stops the victim with SIGTERM (a graceful stop, as an
	// operator restarting a node does) instead of SIGKILL.
	Graceful bool
	// Logf reports progress (default: nothing).
	Logf func(format string, args ...any)
}

func (c *Config) defaults() {
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Partitions == 0 {
		c.Partitions = 1
	}
	if c.Window == 0 {
		c.Window = 16
	}
	if c.LeaseMs == 0 {
		c.LeaseMs = 5000
	}
	if c.Dwell == 0 {
		c.Dwell = time.Second
	}
	if c.HangAfter == 0 {
		c.HangAfter = 30 * time.Second
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// Victim chooses the node a cycle stops.
type Victim int

const (
	// Leader is the leader of the cycle's partition.
	Leader Victim = iota
	// Follower is a node that does not lead the cycle's partition.
	Follower
	// EachInTurn is node i % Nodes at cycle i, leader or not: with
	// Graceful, a rolling restart.
	EachInTurn
)

func (v Victim) String() string {
	switch v {
	case Follower:
		return "follower"
	case EachInTurn:
		return "each in turn"
	}
	return "leader"
}

// Cycle is one kill: which node, which partition it led (with another
// Victim than Leader, the partition watched), and how long
// after the kill a publish to that partition was confirmed and a poll
// served from it again (each measured from requests sent after the kill).
type Cycle struct {
	Node          string
	Partition     int
	Publish, Poll time.Duration
}

// Resume is the later of the two: service back in both directions.
func (c Cycle) Resume() time.Duration { return max(c.Publish, c.Poll) }

// Report is a run's outcome.
type Report struct {
	Cycles  []Cycle
	Result  *history.Result
	History string // the history file
	Elapsed time.Duration
	Logs    string // the nodes' stderr, set when the run failed
	// Unknown counts the publishes whose outcome is unknown, by why
	// (unknownPublishes).
	Unknown map[string]int
}

// unknownPublishes counts the publishes recorded as unknown by their
// answer: the not_leader reason, or the connection lost.
func unknownPublishes(ops []history.Op) map[string]int {
	out := map[string]int{}
	for _, op := range ops {
		if op.Kind != history.Publish || op.Outcome != history.Info {
			continue
		}
		why := op.Err
		for _, r := range []string{"no leader elected yet", "catching up", "has not announced", "forward:", "leadership lost", "connection lost"} {
			if strings.Contains(why, r) {
				why = r
				break
			}
		}
		if len(why) > 60 {
			why = why[:60]
		}
		out[why]++
	}
	return out
}

// MaxResume and MedianResume summarise the cycles' Resume times.
func (r *Report) MaxResume() time.Duration {
	var m time.Duration
	for _, c := range r.Cycles {
		m = max(m, c.Resume())
	}
	return m
}

// MedianResume is the median of the cycles' Resume times (0 with none).
func (r *Report) MedianResume() time.Duration {
	if len(r.Cycles) == 0 {
		return 0
	}
	var rs []time.Duration
	for _, c := range r.Cycles {
		rs = append(rs, c.Resume())
	}
	slices.Sort(rs)
	return rs[len(rs)/2]
}

// Summary is one line of figures.
func (r *Report) Summary() string {
	s := fmt.Sprintf("%d kill cycles in %v, resume max %v median %v", len(r.Cycles), r.Elapsed.Round(time.Second),
		r.MaxResume().Round(time.Millisecond), r.MedianResume().Round(time.Millisecond))
	if r.Result != nil {
		s += "; " + r.Result.Summary()
	}
	if len(r.Unknown) > 0 {
		s += fmt.Sprintf("; unknown publishes %v", r.Unknown)
	}
	return s
}

const (
	topic = "kill"
	group = "g"
)

// Run starts the cluster, runs the load, kills the leader Cycles times,
// drains and judges the history. An error means the run could not be
// carried out or hung; the verdict on the broker is in Report.Result,
// also after a hang (an error wrapping errHang): the cycles stop there,
// the killed node is restarted, and what came before is drained and
// judged.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg.defaults()
	start := time.Now()
	rep = &Report{History: filepath.Join(cfg.Dir, "history.jsonl")}
	h, err := history.Create(rep.History)
	if err != nil {
		return rep, err
	}
	defer h.Close()
	cl, err := startCluster(ctx, cfg.Bin, cfg.Dir, cfg.Nodes)
	if err != nil {
		return rep, err
	}
	defer func() {
		if err != nil {
			rep.Logs = cl.logs()
		}
		cl.close()
	}()
	if err := setup(ctx, cl, cfg); err != nil {
		return rep, err
	}
	_ = h.Add(history.Op{Kind: history.Phase, Proc: -1, Value: history.PhaseStart, Invoke: now(), Complete: now()})

	mon := newMonitor()
	l := &load{h: h, mon: mon, addrs: cl.Addrs, topic: topic, group: group, leaseMs: cfg.LeaseMs,
		window: cfg.Window, rate: cfg.Rate, keyed: cfg.Partitions > 1, logf: cfg.Logf}
	pubCtx, stopPub := context.WithCancel(ctx)
	conCtx, stopCon := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.publish(pubCtx, 0) }()
	go func() { defer wg.Done(); l.consume(conCtx, 1, 0) }()
	stop := func() { stopPub(); stopCon(); wg.Wait() }

	since := now()
	var hang error
	for i := range cfg.Cycles {
		c, err := killCycle(ctx, cl, mon, h, cfg, i, i%cfg.Partitions, since)
		if errors.Is(err, errHang) {
			// The killed node is back: drain and judge what happened
			// up to the hang.
			hang = fmt.Errorf("cycle %d: %w", i+1, err)
			cfg.Logf("clusterkill: %v; draining and judging the %d cycles before it", hang, i)
			break
		}
		if err != nil {
			stop()
			return rep, fmt.Errorf("cycle %d: %w", i+1, err)
		}
		rep.Cycles = append(rep.Cycles, c)
		since = now()
		if (i+1)%10 == 0 || i+1 == cfg.Cycles {
			cfg.Logf("clusterkill: %d/%d cycles, last %s p%d resumed in %v (publish %v, poll %v)", i+1, cfg.Cycles,
				c.Node, c.Partition, c.Resume().Round(time.Millisecond), c.Publish.Round(time.Millisecond), c.Poll.Round(time.Millisecond))
		}
		pause(ctx, cfg.Dwell)
	}

	// Drain: the publisher stops (after its outstanding answers), then a
	// consumer takes everything left, until nothing has come for longer
	// than a lease (what was leased and not acked comes back by then).
	_ = h.Add(history.Op{Kind: history.Phase, Proc: -1, Value: history.PhaseDrain, Invoke: now(), Complete: now()})
	stop()
	l.consume(ctx, 2, time.Duration(cfg.LeaseMs)*time.Millisecond+3*time.Second)
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	_ = h.Add(history.Op{Kind: history.Phase, Proc: -1, Value: history.PhaseDone, Invoke: now(), Complete: now()})
	if err := h.Close(); err != nil {
		return rep, err
	}
	ops, err := history.ReadFile(rep.History)
	if err != nil {
		return rep, err
	}
	rep.Result = history.Check(ops, history.Config{LeasesSurviveRestart: true})
	rep.Unknown = unknownPublishes(ops)
	rep.Elapsed = time.Since(start)
	if hang != nil || !rep.Passed() {
		rep.Logs = cl.logs()
	}
	return rep, hang
}

// errHang marks a kill after which the partition was not served again
// within Config.HangAfter.
var errHang = errors.New("a hang")

// Passed reports the pass condition: nothing confirmed lost, no answered
// ack undone, nothing delivered that was never published.
func (r *Report) Passed() bool {
	return r.Result != nil && !r.Result.Incomplete && r.Result.N(history.Lost) == 0 &&
		r.Result.N(history.AckedRedelivered) == 0 && r.Result.N(history.Unexpected) == 0
}

// setup creates the topic and the group, retrying while the cluster has
// no metadata leader yet.
func setup(ctx context.Context, cl *cluster, cfg Config) error {
	cmds := []string{
		fmt.Sprintf(`TOPIC CREATE %s {"partitions":%d}`, topic, cfg.Partitions),
		fmt.Sprintf(`GROUP CREATE %s %s {"lease_ms":%d}`, topic, group, cfg.LeaseMs),
	}
	deadline := time.Now().Add(cfg.HangAfter)
	for _, cmd := range cmds {
		for {
			err := tryOnAny(cl, cmd)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("clusterkill: %s: %w", cmd, errors.Join(err, ctx.Err()))
			}
			pause(ctx, 100*time.Millisecond)
		}
	}
	return nil
}

// tryOnAny sends cmd to each node until one answers +OK. A create that
// finds the topic or group already there (an earlier try took effect) is
// done too.
func tryOnAny(cl *cluster, cmd string) error {
	var errs []error
	for _, a := range cl.Addrs {
		c, err := dial(a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_, err = c.request(cmd)
		c.close()
		if err == nil || (isAnswer(err) && strings.Contains(err.Error(), "exists")) {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// killCycle waits until part was served since, picks the victim
// (cfg.Victim: the node leading part, as the nodes' GET /api/cluster name
// it, one that does not, or node cycle % Nodes), stops it (SIGKILL, or
// SIGTERM with cfg.Graceful), waits until a publish to part is confirmed
// and a poll served from it again, and restarts the node.
func killCycle(ctx context.Context, cl *cluster, mon *monitor, h *history.Writer, cfg Config, cycle, part int, since int64) (Cycle, error) {
	node := -1
	deadline := time.Now().Add(cfg.HangAfter)
	for node < 0 {
		// Every node serves POLLs (forwarded), so where one is served says
		// nothing of who leads: the nodes' own view does.
		if mon.servedSince(part, since) {
			switch cfg.Victim {
			case EachInTurn:
				node = cycle % cfg.Nodes
			case Follower:
				if n, ok := cl.leaderOf(topic, part, func(int) bool { return true }); ok {
					node = (n + 1 + cycle%(cfg.Nodes-1)) % cfg.Nodes
				}
			default:
				if n, ok := cl.leaderOf(topic, part, func(int) bool { return true }); ok {
					node = n
				}
			}
		}
		if node >= 0 {
			break
		}
		if time.Now().After(deadline) {
			return Cycle{}, fmt.Errorf("partition %d served by no node for %v: %w", part, cfg.HangAfter, errHang)
		}
		pause(ctx, 10*time.Millisecond)
	}
	name := cl.Names[node]
	killAt := now()
	mon.arm(part, killAt)
	stop, fault := cl.kill, "kill"
	if cfg.Graceful {
		stop, fault = cl.stop, "stop"
	}
	if err := stop(node); err != nil {
		return Cycle{}, err
	}
	_ = h.Add(history.Op{Kind: history.Fault, Proc: -1, Node: name, Fault: fault, Outcome: history.OK, Invoke: killAt, Complete: now()})
	deadline = time.Now().Add(cfg.HangAfter)
	var pub, poll int64
	for {
		pub, poll = mon.resumed()
		if pub != 0 && poll != 0 {
			break
		}
		if ctx.Err() != nil {
			return Cycle{}, ctx.Err()
		}
		if time.Now().After(deadline) {
			err := fmt.Errorf("%s killed: partition %d not back within %v (confirm seen: %v, delivery seen: %v): %w",
				name, part, cfg.HangAfter, pub != 0, poll != 0, errHang)
			rctx, cancel := context.WithTimeout(ctx, cfg.HangAfter)
			defer cancel()
			inv := now()
			rerr := cl.restart(rctx, node)
			if rerr == nil {
				_ = h.Add(history.Op{Kind: history.Fault, Proc: -1, Node: name, Fault: history.FaultRestart, Outcome: history.OK, Invoke: inv, Complete: now()})
			}
			return Cycle{}, errors.Join(err, rerr)
		}
		pause(ctx, 5*time.Millisecond)
	}
	inv := now()
	rctx, cancel := context.WithTimeout(ctx, cfg.HangAfter)
	defer cancel()
	if err := cl.restart(rctx, node); err != nil {
		return Cycle{}, err
	}
	_ = h.Add(history.Op{Kind: history.Fault, Proc: -1, Node: name, Fault: history.FaultRestart, Outcome: history.OK, Invoke: inv, Complete: now()})
	return Cycle{Node: name, Partition: part, Publish: time.Duration(pub - killAt), Poll: time.Duration(poll - killAt)}, nil
}
