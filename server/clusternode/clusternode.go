// Package clusternode runs a broker as one node of a cluster: a raft
// node (package cluster) over mutual-TLS links, the broker's catalog in
// the metadata group (package metacat), and every partition's logs
// replicated over a raft group of its own (package replog) whose members
// are the nodes the topic's placement names for it (every node, for a
// topic whose replicas are the cluster's node count).
//
// # What it owns
//
//   - The order things open in: the raft node (its metadata group left
//     closed), the broker (each partition's group added as the broker
//     opens it), then the metadata group, whose state machine needs the
//     broker; and the reverse at Close.
//   - The mapping from a partition to its raft group: topic id t and
//     partition i are group t<<16 | (i+1), the same on every node since
//     the replicated catalog gives every node the same ids.
//   - Announcing this node's client address (Announce), retried until the
//     metadata group takes it.
//
// # What it must never do
//
//   - Serve a partition from a log that is not replicated, or open the
//     metadata group before the broker can apply its entries.
//   - Block Close on an announcement or a proposal.
//
// # Caveats
//
//   - A partition's holders are fixed when its topic is created
//     (broker.SpreadPlacement over the sorted member names, recorded in
//     the catalog): moving replicas, and adding or removing nodes, are
//     not built. A partition held elsewhere has no group here.
//     Commands for a partition another node leads are the server's to
//     forward (server/forwarding.go); the broker answers them
//     not_leader.
//   - Partition groups are not compressed (replog's caveat).
package clusternode

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/cluster"
	"github.com/fibrilmq/fibril/server/cluster/transport"
	"github.com/fibrilmq/fibril/server/metacat"
	"github.com/fibrilmq/fibril/server/replog"
	"github.com/fibrilmq/fibril/server/seglog"
)

// Config describes one node.
type Config struct {
	// Name is the node's name, a DNS label its certificate carries.
	Name string
	// Listen is the cluster listen address (host:port).
	Listen string
	// Peers are the other nodes (name and cluster address); every node
	// of a cluster is started with the same set of names.
	Peers []cluster.PeerConfig
	// TLS names the node's certificate, key and the cluster CA.
	TLS transport.TLSFiles
	// Dir is the data directory: the broker's, with the raft node's in
	// Dir/cluster.
	Dir string
	// Engine holds the broker's other options (Catalog and
	// OpenPartition are this package's).
	Engine broker.Options
	// Tick is raft's tick (default 100 ms); ElectionTicks (default 10)
	// ticks without a leader start an election, so a dead leader is
	// replaced in about ElectionTicks..2*ElectionTicks ticks.
	Tick          time.Duration
	ElectionTicks int
	// CatalogTimeout bounds a catalog change's wait (default 10 s).
	CatalogTimeout time.Duration
	// OnNodes is told the nodes' records when they change (not blocking).
	OnNodes func(map[string]metacat.NodeInfo)
	// Logf reports background errors.
	Logf func(format string, args ...any)
}

// Node is a running node.
type Node struct {
	cfg     Config
	members []string
	raft    *cluster.Node
	cat     *metacat.Catalog
	b       *broker.Broker
	stop    chan struct{}
	wg      sync.WaitGroup
}

// Open starts the node: its raft links, its broker, its catalog.
func Open(cfg Config) (*Node, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Engine.OpenStore != nil || cfg.Engine.OpenPartition != nil || cfg.Engine.Catalog != nil {
		return nil, errors.New("clusternode: Engine's OpenStore, OpenPartition and Catalog are the node's")
	}
	n := &Node{cfg: cfg, members: []string{cfg.Name}, stop: make(chan struct{})}
	for _, p := range cfg.Peers {
		n.members = append(n.members, p.Name)
	}
	slices.Sort(n.members)
	if len(n.members) != 3 && len(n.members) != 5 {
		return nil, fmt.Errorf("clusternode: a cluster has 3 or 5 nodes, this one names %d (%v)", len(n.members), n.members)
	}
	rn, err := cluster.NewNode(cluster.NodeConfig{Name: cfg.Name, Listen: cfg.Listen, Seeds: cfg.Peers,
		Dir: filepath.Join(cfg.Dir, "cluster"), TLS: cfg.TLS, MetaLater: true,
		Tick: cfg.Tick, ElectionTicks: cfg.ElectionTicks})
	if err != nil {
		return nil, fmt.Errorf("clusternode: %w", err)
	}
	if err := rn.Start(); err != nil {
		return nil, fmt.Errorf("clusternode: %w", err)
	}
	n.raft = rn
	cat, err := metacat.New(metacat.Config{Node: cfg.Name, Timeout: cfg.CatalogTimeout, OnNodes: cfg.OnNodes, Dir: cfg.Dir})
	if err != nil {
		rn.Stop()
		return nil, err
	}
	n.cat = cat
	bo := cfg.Engine
	bo.Catalog, bo.OpenPartition, bo.Replicas = cat, n.openPartition, len(n.members)
	bo.Node, bo.Place = cfg.Name, broker.SpreadPlacement(n.members)
	b, err := broker.Open(cfg.Dir, bo)
	if err != nil {
		rn.Stop()
		return nil, fmt.Errorf("clusternode: %w", err)
	}
	n.b = b
	cat.Attach(b)
	if err := rn.OpenMeta(cat.StateMachine()); err != nil {
		b.Close()
		rn.Stop()
		return nil, fmt.Errorf("clusternode: %w", err)
	}
	cat.Serve(rn.Group(cluster.MetaGroup))
	return n, nil
}

// Broker is the node's broker.
func (n *Node) Broker() *broker.Broker { return n.b }

// Catalog is the node's replicated catalog.
func (n *Node) Catalog() *metacat.Catalog { return n.cat }

// Raft is the node's raft node (status, metrics).
func (n *Node) Raft() *cluster.Node { return n.raft }

// Members are the cluster's node names, sorted.
func (n *Node) Members() []string { return slices.Clone(n.members) }

// Announce records in the cluster how this node serves clients (its
// address, its forwarding token), retrying in the background until the
// metadata group takes it or the node closes.
func (n *Node) Announce(info metacat.NodeInfo) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
			err := n.cat.Announce(info)
			if err == nil {
				return
			}
			if wait >= time.Second {
				n.cfg.Logf("WARN announcing this node's client address %s: %v (retrying)", info.Client, err)
			}
			select {
			case <-n.stop:
				return
			case <-time.After(wait):
			}
		}
	}()
}

// Close stops the broker (its partitions' groups with it), then the raft
// node.
func (n *Node) Close() error {
	close(n.stop)
	err := n.b.Close()
	n.wg.Wait()
	return errors.Join(err, n.raft.Stop())
}

// GroupOf is the raft group of topic id's partition idx.
func GroupOf(topic broker.TopicID, idx int) uint64 { return uint64(topic)<<16 | uint64(idx+1) }

// openPartition is the broker's PartitionOpener: dir is
// <data>/topics/<topic id>/<partition>.
func (n *Node) openPartition(dir string, _ seglog.Policy, holders []string) (broker.PartitionLogs, error) {
	idx, err1 := strconv.Atoi(filepath.Base(dir))
	tid, err2 := strconv.ParseUint(filepath.Base(filepath.Dir(dir)), 10, 32)
	if err1 != nil || err2 != nil || idx < 0 || idx >= 1<<16-1 {
		return broker.PartitionLogs{}, fmt.Errorf("clusternode: %s is not a partition directory (topics/<id>/<partition>)", dir)
	}
	gid := GroupOf(broker.TopicID(tid), idx)
	members := n.members
	if holders != nil {
		if !slices.Contains(holders, n.cfg.Name) {
			return broker.PartitionLogs{}, fmt.Errorf("clusternode: %s: partition placed on %v, not on this node %s", dir, holders, n.cfg.Name)
		}
		members = holders
	}
	p, err := replog.Open(dir, replog.Config{
		// The replica's ID is the node's in every group (replog tells
		// its leadership by it); AddGroupWith sets the members.
		Group:       cluster.Config{ID: n.raft.ID()},
		SegmentSize: n.cfg.Engine.SegmentSize,
		Logf:        n.cfg.Logf,
		OpenGroup: func(gc cluster.Config, sm cluster.StateMachine) (*cluster.Group, error) {
			return n.raft.AddGroupWith(gid, members, sm, func(c *cluster.Config) {
				c.Dir, c.OnLeader, c.CompactBehindMatch = gc.Dir, gc.OnLeader, gc.CompactBehindMatch
				c.SnapshotEvery, c.MaxEntryBytes = gc.SnapshotEvery, gc.MaxEntryBytes
			})
		},
		CloseGroup: func(*cluster.Group) error {
			if err := n.raft.CloseGroup(gid); err != nil && !errors.Is(err, cluster.ErrNoGroup) {
				return err
			}
			return nil
		},
	})
	if err != nil {
		return broker.PartitionLogs{}, err
	}
	return broker.PartitionLogs{Data: p.Data(), Events: p.Events(), Replica: p}, nil
}

// WaitServing waits until every partition of the topic held here is
// served by some node, as far as this node knows (a leader is known for
// each group), or ctx ends. Partitions held elsewhere are not waited for.
func (n *Node) WaitServing(ctx context.Context, t *broker.Topic) error {
	for i := range t.Config().Partitions {
		if !t.HeldHere(broker.Partition(i)) {
			continue
		}
		for n.raft.Group(GroupOf(t.ID(), i)) == nil || n.raft.Group(GroupOf(t.ID(), i)).Leader() == 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("topic %s partition %d: no leader: %w", t.Name(), i, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}
