package faultrun

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fibrilmq/fibril/internal/history"
)

// The network faults of a Cluster (Split, Bridge, Netem) and the Leader
// wrapper. Each is injected on one node, the one the schedule drew or,
// for a picker, the one it picks (the leader as GET /api/cluster names it
// when one is known), held, and healed.

// picker is a fault that chooses its node among the run's, given the one
// the schedule drew.
type picker interface {
	pick(drawn Node) Node
}

// leaderOr returns the cluster's current leader (of a partition of
// Topic, the next one each call) when drawn is a ClusterNode and a node
// names one, else drawn.
func leaderOr(drawn Node) Node {
	cn, ok := drawn.(*ClusterNode)
	if !ok {
		return drawn
	}
	if l, ok := cn.c.Leader(); ok {
		return l
	}
	return drawn
}

func (Isolate) pick(drawn Node) Node { return leaderOr(drawn) }

// Leader is F done to the leader (when a node names one): kill-leader,
// pause-leader, powercut-leader.
type Leader struct{ F Fault }

func (l Leader) Name() string         { return l.F.Name() + "-leader" }
func (l Leader) Disk() bool           { return l.F.Disk() }
func (l Leader) Usable(n Node) bool   { _, ok := n.(*ClusterNode); return ok && l.F.Usable(n) }
func (l Leader) pick(drawn Node) Node { return leaderOr(drawn) }
func (l Leader) Inject(ctx context.Context, n Node) (history.Op, error) {
	return l.F.Inject(ctx, n)
}
func (l Leader) Hold(rng *rand.Rand, lease time.Duration) time.Duration { return l.F.Hold(rng, lease) }
func (l Leader) Heal(ctx context.Context, n Node) (history.Op, error)   { return l.F.Heal(ctx, n) }

// netHold is how long a network fault lasts: past the lease and an
// election.
func netHold(rng *rand.Rand, lease time.Duration) time.Duration {
	return lease + time.Second + time.Duration(rng.IntN(1000))*time.Millisecond
}

// Split cuts the cluster in two, the node (the leader when known) on the
// minority side (one node of 3, two of 5), the clients still reaching
// every node.
type Split struct{}

func (Split) Name() string         { return "split" }
func (Split) Disk() bool           { return false }
func (Split) Usable(n Node) bool   { _, ok := n.(*ClusterNode); return ok }
func (Split) pick(drawn Node) Node { return leaderOr(drawn) }
func (Split) Inject(ctx context.Context, n Node) (history.Op, error) {
	cn := n.(*ClusterNode)
	minority := []*ClusterNode{cn}
	rest := cn.c.others(cn)
	if len(rest) >= 4 { // 5 nodes: 2 against 3
		minority, rest = append(minority, rest[0]), rest[1:]
	}
	op := faultOp("split")
	op.Err = fmt.Sprintf("%s | %s", names(minority), names(rest))
	return op, cn.c.partition(minority, rest)
}
func (Split) Hold(rng *rand.Rand, lease time.Duration) time.Duration { return netHold(rng, lease) }
func (Split) Heal(ctx context.Context, n Node) (history.Op, error) {
	return faultOp("heal"), n.(*ClusterNode).c.heal()
}

// Bridge leaves the node as the only link between two halves of the
// others: each half reaches it and not the other half.
type Bridge struct{}

func (Bridge) Name() string       { return "bridge" }
func (Bridge) Disk() bool         { return false }
func (Bridge) Usable(n Node) bool { _, ok := n.(*ClusterNode); return ok }
func (Bridge) Inject(ctx context.Context, n Node) (history.Op, error) {
	cn := n.(*ClusterNode)
	rest := cn.c.others(cn)
	a, b := rest[:len(rest)/2], rest[len(rest)/2:]
	op := faultOp("bridge")
	op.Err = fmt.Sprintf("%s | %s | %s", names(a), cn.Name(), names(b))
	return op, cn.c.partition(a, b)
}
func (Bridge) Hold(rng *rand.Rand, lease time.Duration) time.Duration { return netHold(rng, lease) }
func (Bridge) Heal(ctx context.Context, n Node) (history.Op, error) {
	return faultOp("heal"), n.(*ClusterNode).c.heal()
}

// Netem applies tc netem Spec to the node's outgoing traffic (to peers
// and clients), then removes it. Usable only where the kernel has netem.
type Netem struct {
	Kind string // its name: delay, loss, duplicate
	Spec string // e.g. "delay 200ms 100ms"
}

func (m Netem) Name() string { return m.Kind }
func (Netem) Disk() bool     { return false }
func (Netem) Usable(n Node) bool {
	cn, ok := n.(*ClusterNode)
	return ok && cn.c.netem
}
func (m Netem) Inject(ctx context.Context, n Node) (history.Op, error) {
	op := faultOp("netem")
	op.Err = m.Spec
	return op, n.(*ClusterNode).nd.Netem(m.Spec)
}
func (Netem) Hold(rng *rand.Rand, lease time.Duration) time.Duration { return netHold(rng, lease) }
func (Netem) Heal(ctx context.Context, n Node) (history.Op, error) {
	return faultOp("netem-off"), n.(*ClusterNode).nd.Netem("")
}

// NetworkFaults returns the cluster's network kinds: isolate (the
// leader), split, bridge, and netem's delay, loss and duplicate.
func NetworkFaults() []Fault {
	return []Fault{Isolate{}, Split{}, Bridge{},
		Netem{Kind: "delay", Spec: "delay 200ms 100ms"},
		Netem{Kind: "loss", Spec: "loss 30%"},
		Netem{Kind: "duplicate", Spec: "duplicate 30%"}}
}

// ClusterFaults returns every kind a cluster run draws from by default:
// the single-node defaults, kill, pause and powercut also on the leader,
// and the network kinds.
func ClusterFaults() []Fault {
	out := DefaultFaults()
	out = append(out, Leader{Kill{}}, Leader{Pause{}}, Leader{PowerCut{}})
	return append(out, NetworkFaults()...)
}
