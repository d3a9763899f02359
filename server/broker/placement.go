package broker

import (
	"fmt"
	"slices"

	"github.com/fibrilmq/fibril/server/seglog"
)

// Placement: in a cluster (Options.Replicas nodes) a topic's partitions
// are each held by TopicConfig.Replicas of the nodes (1..Replicas; left
// out, every node). Which nodes is decided once, when the topic is
// created: the broker that proposes the create asks Options.Place and
// puts the answer in the catalog change, so every broker applies the
// same placement and records it in the topic's catalog entry (catTopic),
// never recomputing it from a membership that may have changed since.
//
// A partition held here opens its logs as any other. A partition held
// elsewhere has no directory and no files here: it runs on empty
// in-memory logs with a role that never serves (heldElsewhere), so its
// actor answers every publish, settle and poll ErrNotLeader as a
// follower's does, and still takes the catalog's control closures (its
// groups exist here too). The server forwards what this node is sent
// for it to the holders (server/forwarding.go).

// Placer picks, for a topic about to be created with the given number of
// partitions and replicas (already checked: 1..the node count), the
// names of the nodes holding each partition. It must not block.
type Placer func(name TopicName, partitions, replicas int) ([][]string, error)

// SpreadPlacement is the placement of a cluster whose node names are
// nodes: the replicas of a topic's partitions are dealt round the nodes
// in name order, partition 0's first, so partition i is held by the
// replicas nodes from position (start + i*replicas) mod len(nodes) on,
// wrapping round; start comes from the topic's name (so topics of one
// partition do not all land on the first node). No node holds more than
// its share of a topic's replicas, rounded up.
func SpreadPlacement(nodes []string) Placer {
	sorted := slices.Clone(nodes)
	slices.Sort(sorted)
	return func(name TopicName, partitions, replicas int) ([][]string, error) {
		n := len(sorted)
		if replicas < 1 || replicas > n {
			return nil, fmt.Errorf("%w: replicas %d: this cluster has %d node(s): give 1..%d", ErrInvalid, replicas, n, n)
		}
		start := int(nameHash(name) % uint64(n))
		out := make([][]string, partitions)
		for i := range out {
			holders := make([]string, replicas)
			for k := range holders {
				holders[k] = sorted[(start+i*replicas+k)%n]
			}
			slices.Sort(holders)
			out[i] = holders
		}
		return out, nil
	}
}

// nameHash is FNV-1a of name: stable across builds and nodes.
func nameHash(name TopicName) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return h
}

// replicasOf is cfg's replica count: given, or every node.
func (b *Broker) replicasOf(cfg TopicConfig) int {
	if cfg.Replicas == 0 {
		return b.opts.Replicas
	}
	return cfg.Replicas
}

// place is the placement a create of name proposes (nil without
// Options.Place: every partition on every node).
func (b *Broker) place(name TopicName, cfg TopicConfig) ([][]string, error) {
	full, err := cfg.withDefaults(name)
	if err != nil {
		return nil, fmt.Errorf("create topic %s: %w", name, err)
	}
	if err := b.checkReplicas(full); err != nil {
		return nil, fmt.Errorf("create topic %s: %w", name, err)
	}
	if b.opts.Place == nil {
		return nil, nil
	}
	r := b.replicasOf(full)
	if r == b.opts.Replicas {
		return nil, nil // every node: the placement of a topic that names none
	}
	p, err := b.opts.Place(name, full.Partitions, r)
	if err != nil {
		return nil, fmt.Errorf("create topic %s: %w", name, err)
	}
	return p, nil
}

// checkReplicas refuses a replica count this cluster cannot hold.
func (b *Broker) checkReplicas(cfg TopicConfig) error {
	n := b.opts.Replicas
	if r := cfg.Replicas; r != 0 && (r < 1 || r > n) {
		return fmt.Errorf("%w: replicas %d: this cluster has %d node(s): give 1..%d, or leave it out for every node", ErrInvalid, r, n, n)
	}
	return nil
}

// checkPlacement checks a topic's placement against its (resolved)
// configuration: nil (every node) unless fewer replicas than nodes are
// asked for, else one list per partition of that many distinct nodes.
// Its refusals are alike on every broker (ErrInvalid).
func (b *Broker) checkPlacement(cfg TopicConfig, placement [][]string) error {
	if err := b.checkReplicas(cfg); err != nil {
		return err
	}
	r := b.replicasOf(cfg)
	if placement == nil {
		if r != b.opts.Replicas {
			return fmt.Errorf("%w: replicas %d of %d nodes with no placement (this node cannot place partitions)", ErrInvalid, r, b.opts.Replicas)
		}
		return nil
	}
	if len(placement) != cfg.Partitions {
		return fmt.Errorf("%w: placement of %d partitions for %d", ErrInvalid, len(placement), cfg.Partitions)
	}
	for i, holders := range placement {
		if len(holders) != r {
			return fmt.Errorf("%w: partition %d placed on %d nodes, want replicas %d", ErrInvalid, i, len(holders), r)
		}
		s := slices.Clone(holders)
		slices.Sort(s)
		if len(slices.Compact(s)) != r {
			return fmt.Errorf("%w: partition %d placed on %v: a node twice", ErrInvalid, i, holders)
		}
	}
	return nil
}

// Holders returns the names of the nodes holding partition idx, sorted;
// nil when every node holds it (a topic of no placement).
func (t *Topic) Holders(idx Partition) []string {
	if t.placement == nil || int(idx) >= len(t.placement) {
		return nil
	}
	return slices.Clone(t.placement[idx])
}

// HeldHere reports whether this node holds partition idx (has its
// files and a replica of its group).
func (t *Topic) HeldHere(idx Partition) bool {
	if t.placement == nil || int(idx) >= len(t.placement) {
		return true
	}
	return slices.Contains(t.placement[idx], t.b.opts.Node)
}

// heldElsewhere is the role of a partition this node does not hold: it
// never serves.
type heldElsewhere struct{}

func (heldElsewhere) Serving() (bool, uint64) { return false, 0 }
func (heldElsewhere) Notify(func())           {}
func (heldElsewhere) WriteState(string, []byte) error {
	return fmt.Errorf("%w: the partition is held by other nodes", ErrNotLeader)
}

// openElsewhere gives a partition held elsewhere its empty logs and its
// role (no directory is made).
func openElsewhere() (data, events seglog.Store, rep Replica) {
	return seglog.NewMemStore(), seglog.NewMemStore(), heldElsewhere{}
}
