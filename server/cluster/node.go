package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/server/cluster/transport"
	pb "go.etcd.io/raft/v3/raftpb"
)

// MetaGroup is the ID of the metadata group every node runs.
const MetaGroup uint64 = 0

// maxGroups bounds the groups one node runs (each is a goroutine, a raft
// log and a ticker); group IDs stay below maxGroupID (the transport
// marks its snapshot chunks with the top bit).
const (
	maxGroups  = 4096
	maxGroupID = 1 << 63
)

// PeerConfig names another node of the cluster and its cluster address.
type PeerConfig struct {
	Name, Addr string
}

// NodeConfig describes one node of a cluster. Every node of a new
// cluster is started with the same set of names (itself plus Seeds).
type NodeConfig struct {
	// Name is the node's name, unique in the cluster, a DNS label (see
	// ParsePeers); its certificate must carry it. Its raft ID in every group is NodeID(Name).
	Name string
	// Listen is the cluster listen address.
	Listen string
	// Seeds are the other nodes of the cluster as it is first started:
	// every group of an empty data directory bootstraps with them and this
	// node as voters. A node that restarts finds its groups' members on
	// disk and uses Seeds only to reach them.
	Seeds []PeerConfig
	// Join says the node joins a running cluster: its groups start empty
	// and wait for the state of a leader that a conf change told of this
	// node (Group.ProposeConfChange, after the members' Node.AddPeer).
	// Seeds are then only the nodes to link to.
	Join bool
	// Dir is the node's data directory: one subdirectory per group.
	Dir string
	// TLS names the node's certificate, key and the cluster CA.
	TLS transport.TLSFiles
	// Groups lists the partition groups the node runs besides MetaGroup.
	Groups []uint64
	// NewStateMachine returns the state machine of a group (required,
	// unless MetaLater and no Groups).
	NewStateMachine func(group uint64) (StateMachine, error)
	// MetaLater leaves the metadata group closed at Start: its owner
	// opens it with OpenMeta once its state machine can answer (a broker
	// whose partitions are groups of this node opens after Start). The
	// peer book is still read and linked at Start.
	MetaLater bool
	// Tick is raft's tick (default 100 ms); ElectionTicks, HeartbeatTicks,
	// SnapshotEvery, MaxEntryBytes and MaxUncommittedBytes are as in
	// Config.
	Tick                          time.Duration
	ElectionTicks, HeartbeatTicks int
	SnapshotEvery                 uint64
	MaxEntryBytes                 int
	MaxUncommittedBytes           uint64
	// Transport tunes the cluster links (its ID, Name, Listen, Creds,
	// Handler, OnUnreachable, OnSnapshot and SnapshotDir are the node's
	// own and are ignored).
	Transport transport.Options
}

// NodeID returns the raft ID a node named name has in every group: a
// 64-bit FNV-1a hash of the name, never 0. NewNode refuses a cluster
// whose names collide.
func NodeID(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	if id := h.Sum64(); id != 0 {
		return id
	}
	return 1
}

func (c NodeConfig) validate() (ids []uint64, err error) {
	if c.Name == "" || c.Listen == "" || c.Dir == "" || (c.NewStateMachine == nil && !(c.MetaLater && len(c.Groups) == 0)) {
		return nil, errors.New("cluster: a node needs a name, a listen address, a directory and NewStateMachine (or MetaLater and no Groups)")
	}
	if err := checkName(c.Name); err != nil {
		return nil, fmt.Errorf("cluster: node %w", err)
	}
	if len(c.Groups) >= maxGroups {
		return nil, fmt.Errorf("cluster: %d groups, at most %d", len(c.Groups), maxGroups-1)
	}
	names := map[uint64]string{NodeID(c.Name): c.Name}
	ids = []uint64{NodeID(c.Name)}
	for _, p := range c.Seeds {
		id := NodeID(p.Name)
		if p.Addr == "" {
			return nil, fmt.Errorf("cluster: seed %+v needs an address", p)
		}
		if err := checkName(p.Name); err != nil {
			return nil, fmt.Errorf("cluster: seed %w", err)
		}
		if other, ok := names[id]; ok {
			return nil, fmt.Errorf("cluster: node names %q and %q have the same ID (or are the same)", other, p.Name)
		}
		names[id] = p.Name
		ids = append(ids, id)
	}
	// One append of a maximal entry, with raft's other entries up to its
	// 1 MiB message size and headers, must fit a frame.
	entry, frame := c.MaxEntryBytes, c.Transport.MaxFrame
	if entry == 0 {
		entry = DefaultMaxEntryBytes
	}
	if frame == 0 {
		frame = 16 << 20
	}
	if frame < entry+(2<<20) {
		return nil, fmt.Errorf("cluster: Transport.MaxFrame %d must exceed MaxEntryBytes %d by 2 MiB", frame, entry)
	}
	seen := map[uint64]bool{MetaGroup: true}
	for _, g := range c.Groups {
		if g >= maxGroupID {
			return nil, fmt.Errorf("cluster: group ID %d, at most %d", g, maxGroupID-1)
		}
		if seen[g] {
			return nil, fmt.Errorf("cluster: group %d listed twice (or is the metadata group)", g)
		}
		seen[g] = true
	}
	return ids, nil
}

// Node is one member of a cluster: the transport to its peers and its
// groups (MetaGroup and Config.Groups), each a Group whose replica ID is
// the node's. A Node is started once and stopped once; to restart, make
// a new one with the same config. Its methods are safe for concurrent use.
type Node struct {
	cfg     NodeConfig
	id      uint64
	ids     []uint64
	tr      *transport.Transport
	mu      sync.RWMutex // guards groups and state
	groups  map[uint64]*Group
	opening map[uint64]bool // groups AddGroup is opening (node_groups.go)
	book    *peerBook       // the metadata group's state machine (peerbook.go)
	state   int             // 0 new, 1 started, 2 stopped
	unknown atomic.Uint64
}

// NewNode checks cfg and returns a node not yet started. It does not
// change cfg.
func NewNode(cfg NodeConfig) (*Node, error) {
	ids, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	cfg.Seeds = append([]PeerConfig(nil), cfg.Seeds...)
	cfg.Groups = append([]uint64(nil), cfg.Groups...)
	if cfg.Tick <= 0 {
		cfg.Tick = 100 * time.Millisecond
	}
	return &Node{cfg: cfg, id: ids[0], ids: ids, groups: map[uint64]*Group{}}, nil
}

// ID returns the node's raft ID.
func (n *Node) ID() uint64 { return n.id }

// Addr returns the address the cluster transport listens on (nil before
// Start).
func (n *Node) Addr() string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.tr == nil {
		return ""
	}
	return n.tr.Addr().String()
}

// Start listens, opens every group from its directory (bootstrapping an
// empty one) and links to the seeds. On failure it undoes what it
// started and returns the first error.
func (n *Node) Start() error {
	n.mu.Lock()
	if n.state != 0 {
		n.mu.Unlock()
		return errors.New("cluster: a node starts once")
	}
	n.state = 1
	n.mu.Unlock()
	tr, groups, book, err := n.open()
	if err != nil {
		closeAll(tr, groups)
		n.mu.Lock()
		n.state = 2
		n.mu.Unlock()
		return fmt.Errorf("cluster: node %s: %w", n.cfg.Name, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state == 2 { // stopped while starting
		closeAll(tr, groups)
		return errors.New("cluster: node stopped while starting")
	}
	n.tr, n.groups, n.book = tr, groups, book
	return nil
}

// open makes the transport and the groups; until Start publishes them,
// messages for the groups are dropped as for unknown groups (raft
// retries).
func (n *Node) open() (*transport.Transport, map[uint64]*Group, *peerBook, error) {
	creds, err := transport.LoadCredentials(n.cfg.TLS)
	if err != nil {
		return nil, nil, nil, err
	}
	// Snapshots received in chunks are assembled in Dir/snap-in; what a
	// crash left there is dropped.
	o := n.cfg.Transport
	o.SnapshotDir = filepath.Join(n.cfg.Dir, "snap-in")
	if err := os.RemoveAll(o.SnapshotDir); err != nil {
		return nil, nil, nil, fmt.Errorf("clear %s: %w", o.SnapshotDir, err)
	}
	if err := os.MkdirAll(o.SnapshotDir, 0o755); err != nil {
		return nil, nil, nil, err
	}
	o.ID, o.Name, o.Listen, o.Creds, o.Handler, o.OnUnreachable = n.id, n.cfg.Name, n.cfg.Listen, creds, n.deliver, n.unreachable
	o.OnSnapshot, o.OnFetch = n.snapshotDone, n.answerFetch
	tr, err := transport.New(o)
	if err != nil {
		return nil, nil, nil, err
	}
	link := func(p PeerConfig) error {
		return tr.AddPeer(transport.Peer{ID: NodeID(p.Name), Name: p.Name, Addr: p.Addr})
	}
	for _, p := range n.cfg.Seeds {
		if err := link(p); err != nil {
			return tr, nil, nil, err
		}
	}
	var book *peerBook
	groups := map[uint64]*Group{}
	if n.cfg.MetaLater {
		if book, err = openPeerBook(n.cfg.Dir, n.cfg.Name, nil, link); err != nil {
			return tr, groups, nil, err
		}
	}
	for _, g := range append([]uint64{MetaGroup}, n.cfg.Groups...) {
		if g == MetaGroup && n.cfg.MetaLater {
			continue
		}
		sm, err := n.cfg.NewStateMachine(g)
		if err != nil {
			return tr, groups, nil, fmt.Errorf("state machine of group %d: %w", g, err)
		}
		if g == MetaGroup {
			if book, err = openPeerBook(n.cfg.Dir, n.cfg.Name, sm, link); err != nil {
				return tr, groups, nil, err
			}
			sm = book
		}
		grp, err := OpenGroup(n.groupConfig(g, n.ids, n.cfg.Join), sm, tr.Group(g), n.cfg.Tick)
		if err != nil {
			return tr, groups, nil, fmt.Errorf("group %d: %w", g, err)
		}
		groups[g] = grp
	}
	return tr, groups, book, nil
}

// groupConfig is the Config of this node's replica of group g with
// members peers (raft IDs, this node's among them unless join).
func (n *Node) groupConfig(g uint64, peers []uint64, join bool) Config {
	return Config{ID: n.id, Peers: peers, Join: join, Dir: n.groupDir(g), ForwardProposals: g == MetaGroup,
		ElectionTicks: n.cfg.ElectionTicks, HeartbeatTicks: n.cfg.HeartbeatTicks, SnapshotEvery: n.cfg.SnapshotEvery,
		MaxEntryBytes: n.cfg.MaxEntryBytes, MaxUncommittedBytes: n.cfg.MaxUncommittedBytes,
		Fetch: func(ctx context.Context, to uint64, req []byte) (io.ReadCloser, error) {
			n.mu.RLock()
			tr := n.tr
			n.mu.RUnlock()
			if tr == nil {
				return nil, fmt.Errorf("cluster: node %s is not running", n.cfg.Name)
			}
			return tr.Fetch(ctx, to, g, req)
		}}
}

// answerFetch is the transport's OnFetch: the group's replica here
// answers (Group.AnswerFetch), ErrNoGroup for a group it does not run.
func (n *Node) answerFetch(from, group uint64, req []byte, w io.Writer) error {
	g := n.Group(group)
	if g == nil {
		return fmt.Errorf("cluster: node %s: group %d: %w", n.cfg.Name, group, ErrNoGroup)
	}
	return g.AnswerFetch(from, req, w)
}

// groupDir is where group g's raft log lives.
func (n *Node) groupDir(g uint64) string {
	return filepath.Join(n.cfg.Dir, "groups", strconv.FormatUint(g, 10))
}

// closeAll closes groups, then tr, returning the first error.
func closeAll(tr *transport.Transport, groups map[uint64]*Group) error {
	var first error
	for id, g := range groups {
		if err := g.Close(); err != nil && first == nil {
			first = fmt.Errorf("close group %d: %w", id, err)
		}
	}
	if tr != nil {
		if err := tr.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// deliver is the transport's handler: it hands m to its group, dropping
// (and counting) a message for a group this node does not run.
func (n *Node) deliver(group uint64, m *pb.Message) {
	n.mu.RLock()
	g := n.groups[group]
	n.mu.RUnlock()
	if g == nil {
		n.unknown.Add(1)
		return
	}
	g.Step(m)
}

// TransferLeadership hands the leadership of every group this node leads
// to that group's most caught-up follower, one group after another, and
// returns once each has moved (run it before Stop for a restart that
// waits for no election). It returns the first failure, naming the group;
// ctx bounds the whole.
func (n *Node) TransferLeadership(ctx context.Context) error {
	n.mu.RLock()
	groups := make(map[uint64]*Group, len(n.groups))
	for id, g := range n.groups {
		groups[id] = g
	}
	n.mu.RUnlock()
	for id, g := range groups {
		if g.Leader() != n.id {
			continue
		}
		st, err := g.Status(ctx)
		if err != nil {
			return fmt.Errorf("cluster: node %s: group %d: %w", n.cfg.Name, id, err)
		}
		var to, best uint64
		for peer, m := range st.Match {
			if peer != n.id && (to == 0 || m > best) {
				to, best = peer, m
			}
		}
		if to == 0 {
			continue // a group of one
		}
		if err := g.TransferLeadership(ctx, to); err != nil {
			return fmt.Errorf("cluster: node %s: move group %d's leadership to %d: %w", n.cfg.Name, id, to, err)
		}
	}
	return nil
}

// snapshotDone hands a snapshot's outcome to the group that sent it.
func (n *Node) snapshotDone(group, to uint64, ok bool) {
	n.mu.RLock()
	g := n.groups[group]
	n.mu.RUnlock()
	if g != nil {
		g.ReportSnapshot(to, ok)
	}
}

// unreachable tells every group that the peer id could not be reached.
func (n *Node) unreachable(id uint64) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, g := range n.groups {
		g.ReportUnreachable(id)
	}
}

// Group returns the node's replica of group id, or nil if it runs none.
func (n *Node) Group(id uint64) *Group {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.groups[id]
}

// AddPeer links this node alone to another one (ProposePeer links every
// node), so that a conf change can make it a member of the node's groups (it is refused for a name whose ID is
// this node's or a peer's). It fails before Start and after Stop.
func (n *Node) AddPeer(p PeerConfig) error {
	if p.Name == "" || p.Addr == "" {
		return fmt.Errorf("cluster: peer %+v needs a name and an address", p)
	}
	n.mu.RLock()
	tr, state := n.tr, n.state
	n.mu.RUnlock()
	if tr == nil || state != 1 {
		return fmt.Errorf("cluster: node %s is not running", n.cfg.Name)
	}
	if err := tr.AddPeer(transport.Peer{ID: NodeID(p.Name), Name: p.Name, Addr: p.Addr}); err != nil {
		return fmt.Errorf("cluster: node %s: %w", n.cfg.Name, err)
	}
	return nil
}

// ProposePeer adds p to the cluster's peer book: a peer record is
// proposed to the metadata group (so it must be called on that group's
// leader), and once it is applied on a node, that node links to p. It
// blocks and fails as Group.Propose does, after checking p as
// ParsePeers would; run it before the conf change that makes p a member
// of a group. It returns the record's index.
func (n *Node) ProposePeer(ctx context.Context, p PeerConfig) (uint64, error) {
	if err := checkName(p.Name); err != nil {
		return 0, fmt.Errorf("cluster: peer %w", err)
	}
	if _, port, err := net.SplitHostPort(p.Addr); err != nil || port == "" {
		return 0, fmt.Errorf("cluster: peer %s: address %q is not host:port", p.Name, p.Addr)
	}
	g := n.Group(MetaGroup)
	if g == nil {
		return 0, fmt.Errorf("cluster: node %s is not running", n.cfg.Name)
	}
	return g.Propose(ctx, peerRecord(p))
}

// Peers returns the peer book as this node applied it: name -> address
// (nil before Start).
func (n *Node) Peers() map[string]string {
	n.mu.RLock()
	b := n.book
	n.mu.RUnlock()
	if b == nil {
		return nil
	}
	return b.peerList()
}

// RemovePeer cuts the links to and from the node named name (once a conf
// change removed it from the node's groups).
func (n *Node) RemovePeer(name string) {
	n.mu.RLock()
	tr := n.tr
	n.mu.RUnlock()
	if tr != nil {
		tr.RemovePeer(NodeID(name))
	}
}

// NodeStats are a node's counters: its transport's, and the messages
// dropped for a group it does not run.
type NodeStats struct {
	Transport    transport.Stats
	UnknownGroup uint64
}

// Stats returns the node's counters.
func (n *Node) Stats() NodeStats {
	n.mu.RLock()
	defer n.mu.RUnlock()
	s := NodeStats{UnknownGroup: n.unknown.Load()}
	if n.tr != nil {
		s.Transport = n.tr.Stats()
	}
	return s
}

// Stop closes every group (pending proposals end with ErrClosed, their
// outcome unknown; storage synced) and then the transport. It returns the
// first error.
func (n *Node) Stop() error {
	n.mu.Lock()
	if n.state == 2 {
		n.mu.Unlock()
		return nil
	}
	n.state = 2
	tr, groups := n.tr, n.groups
	n.groups = map[uint64]*Group{}
	n.mu.Unlock()
	// Not under mu: the transport's readers take it to deliver, and
	// closing the transport waits for them.
	if err := closeAll(tr, groups); err != nil {
		return fmt.Errorf("cluster: node %s: %w", n.cfg.Name, err)
	}
	return nil
}
