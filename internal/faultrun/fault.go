package faultrun

import (
	"context"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/fibrilmq/fibril/internal/history"
)

// Fault is one kind of fault. The run injects it on a node, holds it for
// Hold, then heals it; each step returns the fault op to record (kind,
// offset) and the run adds times and the node.
type Fault interface {
	// Name is the kind, as -faults and the report name it.
	Name() string
	// Disk reports whether the fault needs the node's data on faultfs.
	Disk() bool
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
func (Kill) Disk() bool         { return false }
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
func (Pause) Disk() bool         { return false }
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
func (ClockStep) Disk() bool         { return false }
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
func (PowerCut) Disk() bool         { return true }
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

// Isolate takes the node's network link down past the lease, then up:
// clients can neither reach it nor hear from it meanwhile.
type Isolate struct{}

func (Isolate) Name() string       { return "isolate" }
func (Isolate) Disk() bool         { return false }
func (Isolate) Usable(n Node) bool { return n.CanIsolate() }
func (Isolate) Inject(ctx context.Context, n Node) (history.Op, error) {
	return faultOp("link-down"), n.Isolate()
}
func (Isolate) Hold(rng *rand.Rand, lease time.Duration) time.Duration {
	return lease + time.Second + time.Duration(rng.IntN(1000))*time.Millisecond
}
func (Isolate) Heal(ctx context.Context, n Node) (history.Op, error) {
	return faultOp("link-up"), n.Rejoin()
}

// FsyncFail makes every fsync fail with EIO for a while, then cuts the
// power and restarts the node with a healthy disk: whatever the node
// answered while its fsyncs failed must not have been a confirm or an ack
// it could not keep.
type FsyncFail struct{}

func (FsyncFail) Name() string       { return "fsync-eio" }
func (FsyncFail) Disk() bool         { return true }
func (FsyncFail) Usable(n Node) bool { return n.CanPowerCut() }
func (FsyncFail) Inject(ctx context.Context, n Node) (history.Op, error) {
	return faultOp("fsync-eio"), n.FailDisk(syscall.EIO, 0)
}
func (FsyncFail) Hold(rng *rand.Rand, _ time.Duration) time.Duration {
	return 500*time.Millisecond + time.Duration(rng.IntN(1000))*time.Millisecond
}
func (FsyncFail) Heal(ctx context.Context, n Node) (history.Op, error) {
	if err := n.PowerCut(ctx); err != nil {
		return faultOp("powercut"), err
	}
	if err := n.FailDisk(0, 0); err != nil {
		return faultOp("powercut"), err
	}
	return faultOp(history.FaultRestart), n.Restart(ctx)
}

// DiskFull makes every write fail with ENOSPC for a while, then frees the
// disk: the node must refuse what it cannot store and serve again without
// a restart.
type DiskFull struct{}

func (DiskFull) Name() string       { return "enospc" }
func (DiskFull) Disk() bool         { return true }
func (DiskFull) Usable(n Node) bool { return n.CanPowerCut() }
func (DiskFull) Inject(ctx context.Context, n Node) (history.Op, error) {
	return faultOp("enospc"), n.FailDisk(0, syscall.ENOSPC)
}
func (DiskFull) Hold(rng *rand.Rand, _ time.Duration) time.Duration {
	return 500*time.Millisecond + time.Duration(rng.IntN(1000))*time.Millisecond
}
func (DiskFull) Heal(ctx context.Context, n Node) (history.Op, error) {
	return faultOp("disk-freed"), n.FailDisk(0, 0)
}

// AllFaults returns every single-node fault kind.
func AllFaults() []Fault {
	return append(DefaultFaults(), DiskFull{}, Isolate{})
}

// DefaultFaults returns the kinds a run draws from by default: all but
// DiskFull, which fails the checker today (FAULTS.md, "Findings").
func DefaultFaults() []Fault {
	return []Fault{Kill{}, Pause{}, ClockStep{Step: time.Hour}, ClockStep{Step: -time.Hour}, PowerCut{}, FsyncFail{}}
}

// everyFault is every kind FaultsByName knows.
func everyFault() []Fault {
	return append(AllFaults(), Leader{Kill{}}, Leader{Pause{}}, Leader{PowerCut{}}, Split{}, Bridge{},
		NetworkFaults()[3], NetworkFaults()[4], NetworkFaults()[5])
}

// FaultsByName returns the kinds named (as Name says), or an error naming
// one that is unknown.
func FaultsByName(names []string) ([]Fault, error) {
	var out []Fault
	for _, name := range names {
		found := false
		for _, f := range everyFault() {
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
	return "faultrun: unknown fault " + u.name + " (kill, pause, clock-forward, clock-back, powercut, fsync-eio, enospc, isolate; on a cluster also kill-leader, pause-leader, powercut-leader, split, bridge, delay, loss, duplicate)"
}
