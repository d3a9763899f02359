package faultrun

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/fibrilmq/fibril/internal/history"
)

// Fault is one kind of fault. The run injects it on a node, holds it for
// Hold, then heals it; each step returns the fault op to record (kind,
// offset) and the run adds times and the node.
type Fault interface {
	// Name is the kind, as -faults and the report name it.
	Name() string
	// Usable reports whether the fault can be done to n here.
	Usable(n Node) bool
	// Inject breaks n and returns what happened.
	Inject(ctx context.Context, n Node) (history.Op, error)
	// Hold is how long the fault lasts before Heal (drawn from rng).
	Hold(rng *rand.Rand, lease time.Duration) time.Duration
	// Heal repairs n and returns what happened.
	Heal(ctx context.Context, n Node) (history.Op, error)
}

func faultOp(kind string) history.Op { return history.Op{Kind: history.Fault, Fault: kind} }

// Kill is SIGKILL, then a restart on the same data.
type Kill struct{}

func (Kill) Name() string       { return "kill" }
func (Kill) Usable(n Node) bool { return true }
func (Kill) Inject(ctx context.Context, n Node) (history.Op, error) {
	return faultOp("kill"), n.Kill(ctx)
}
func (Kill) Hold(rng *rand.Rand, _ time.Duration) time.Duration {
	return time.Duration(rng.IntN(1000)) * time.Millisecond
}
func (Kill) Heal(ctx context.Context, n Node) (history.Op, error) {
	return faultOp(history.FaultRestart), n.Restart(ctx)
}

// Pause is SIGSTOP held beyond the lease, then SIGCONT.
type Pause struct{}

func (Pause) Name() string       { return "pause" }
func (Pause) Usable(n Node) bool { return true }
func (Pause) Inject(ctx context.Context, n Node) (history.Op, error) {
	return faultOp("stop"), n.Pause()
}
func (Pause) Hold(rng *rand.Rand, lease time.Duration) time.Duration {
	return lease + time.Second + time.Duration(rng.IntN(1000))*time.Millisecond
}
func (Pause) Heal(ctx context.Context, n Node) (history.Op, error) {
	return faultOp("cont"), n.Resume()
}

// ClockStep steps the node's clock by Step (an hour forward, or back when
// negative), then back to real time.
type ClockStep struct{ Step time.Duration }

func (c ClockStep) Name() string {
	if c.Step < 0 {
		return "clock-back"
	}
	return "clock-forward"
}
func (ClockStep) Usable(n Node) bool { return true }
func (c ClockStep) Inject(ctx context.Context, n Node) (history.Op, error) {
	op := faultOp(history.FaultClock)
	op.OffsetMs = c.Step.Milliseconds()
	return op, n.SetClock(c.Step)
}
func (ClockStep) Hold(rng *rand.Rand, lease time.Duration) time.Duration {
	return time.Second + time.Duration(rng.IntN(2000))*time.Millisecond
}
func (ClockStep) Heal(ctx context.Context, n Node) (history.Op, error) {
	return faultOp(history.FaultClock), n.SetClock(0)
}

// PowerCut kills the node and drops its unsynced writes, then restarts it.
type PowerCut struct{}

func (PowerCut) Name() string       { return "powercut" }
func (PowerCut) Usable(n Node) bool { return n.CanPowerCut() }
func (PowerCut) Inject(ctx context.Context, n Node) (history.Op, error) {
	return faultOp("powercut"), n.PowerCut(ctx)
}
func (PowerCut) Hold(rng *rand.Rand, _ time.Duration) time.Duration {
	return time.Duration(rng.IntN(500)) * time.Millisecond
}
func (PowerCut) Heal(ctx context.Context, n Node) (history.Op, error) {
	return faultOp(history.FaultRestart), n.Restart(ctx)
}

// AllFaults returns every single-node fault kind.
func AllFaults() []Fault {
	return []Fault{Kill{}, Pause{}, ClockStep{Step: time.Hour}, ClockStep{Step: -time.Hour}, PowerCut{}}
}

// FaultsByName returns the kinds named (as Name says), or an error naming
// one that is unknown.
func FaultsByName(names []string) ([]Fault, error) {
	var out []Fault
	for _, name := range names {
		found := false
		for _, f := range AllFaults() {
			if f.Name() == name {
				out, found = append(out, f), true
			}
		}
		if !found {
			return nil, &unknownFault{name}
		}
	}
	return out, nil
}

type unknownFault struct{ name string }

func (u *unknownFault) Error() string {
	return "faultrun: unknown fault " + u.name + " (kill, pause, clock-forward, clock-back, powercut)"
}
