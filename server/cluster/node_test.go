package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/cluster/certgen"
	"github.com/fibrilmq/fibril/server/cluster/transport"
	pb "go.etcd.io/raft/v3/raftpb"
)

// testCluster is a cluster of Nodes in this process over real TCP and
// mutual TLS on 127.0.0.1.
type testCluster struct {
	t    *testing.T
	cfgs map[string]NodeConfig
	mu   sync.Mutex
	live map[string]*Node
	sms  map[string]map[uint64]*lockedSM // node -> group -> its current state machine
}

func newTestCluster(t *testing.T, names ...string) *testCluster {
	return newTestClusterJoin(t, names, nil)
}

// newTestClusterJoin starts a cluster of names and has configs ready (not
// started) for joiners, nodes that join it later.
func newTestClusterJoin(t *testing.T, names, joiners []string) *testCluster {
	return newTestClusterWith(t, names, joiners, nil)
}

// newTestClusterWith is newTestClusterJoin with each config passed to
// tune (if set) before any node starts.
func newTestClusterWith(t *testing.T, names, joiners []string, tune func(*NodeConfig)) *testCluster {
	base := t.TempDir()
	all := append(append([]string(nil), names...), joiners...)
	paths, err := certgen.WriteCluster(t.TempDir(), time.Hour, all...)
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	for _, n := range all {
		// A port the kernel picked, freed for the node to listen on.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[n] = ln.Addr().String()
		ln.Close()
	}
	c := &testCluster{t: t, cfgs: map[string]NodeConfig{}, live: map[string]*Node{}, sms: map[string]map[uint64]*lockedSM{}}
	for i, n := range all {
		var seeds []PeerConfig
		for _, o := range names {
			if o != n {
				seeds = append(seeds, PeerConfig{Name: o, Addr: addrs[o]})
			}
		}
		name := n
		c.cfgs[n] = NodeConfig{Name: n, Listen: addrs[n], Seeds: seeds, Dir: filepath.Join(base, n), Join: i >= len(names),
			TLS: transport.TLSFiles(paths[n]), Groups: []uint64{1, 2}, Tick: 20 * time.Millisecond,
			SnapshotEvery: 100, Transport: transport.Options{MaxBackoff: 100 * time.Millisecond},
			NewStateMachine: func(g uint64) (StateMachine, error) {
				sm := &lockedSM{sm: newTestSM()}
				c.mu.Lock()
				c.sms[name][g] = sm
				c.mu.Unlock()
				return sm, nil
			}}
	}
	if tune != nil {
		for n, cfg := range c.cfgs {
			tune(&cfg)
			c.cfgs[n] = cfg
		}
	}
	for _, n := range names {
		c.start(n)
	}
	t.Cleanup(c.stopAll)
	return c
}

func (c *testCluster) start(name string) {
	c.mu.Lock()
	c.sms[name] = map[uint64]*lockedSM{}
	c.mu.Unlock()
	nd, err := NewNode(c.cfgs[name])
	if err != nil {
		c.t.Fatal(err)
	}
	if err := nd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.live[name] = nd
	c.mu.Unlock()
}

func (c *testCluster) stop(name string) {
	c.mu.Lock()
	nd := c.live[name]
	delete(c.live, name)
	c.mu.Unlock()
	if err := nd.Stop(); err != nil {
		c.t.Fatalf("stop %s: %v", name, err)
	}
}

func (c *testCluster) stopAll() {
	c.mu.Lock()
	names := make([]string, 0, len(c.live))
	for n := range c.live {
		names = append(names, n)
	}
	c.mu.Unlock()
	for _, n := range names {
		c.stop(n)
	}
}

// leader returns the name of a live node that a live node knows as the
// leader of group g ("" if none).
func (c *testCluster) leader(g uint64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nd := range c.live {
		lead := nd.Group(g).Leader()
		for name, other := range c.live {
			if lead != 0 && other.ID() == lead {
				return name
			}
		}
	}
	return ""
}

func (c *testCluster) node(name string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live[name]
}

func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// propose proposes data in group g on whichever node leads it, retrying a
// bounded number of times (with a new value: the outcome of a failed try
// is unknown) and returning the value that was acknowledged and its index.
func (c *testCluster) propose(g uint64, data string) (string, uint64) {
	for attempt := 0; attempt < 30; attempt++ {
		var lead string
		waitLong(c.t, fmt.Sprintf("a leader of group %d", g), func() bool { lead = c.leader(g); return lead != "" })
		nd := c.node(lead)
		if nd == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		idx, err := nd.Group(g).Propose(ctx, []byte(data))
		cancel()
		if err == nil {
			return data, idx
		}
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrLeaderChanged) && !errors.Is(err, ErrClosed) && !errors.Is(err, context.DeadlineExceeded) {
			c.t.Errorf("propose %s in group %d: %v", data, g, err)
			return "", 0
		}
		data = fmt.Sprintf("%s-retry%d", data, attempt)
		time.Sleep(10 * time.Millisecond) // an election takes ticks, not retries
	}
	c.t.Errorf("propose %s in group %d: no success in 30 tries", data, g)
	return "", 0
}

// check waits until the named nodes applied group g's hist up to its
// highest acknowledged index, then checks the history's invariants.
func (c *testCluster) check(g uint64, hist *history, names ...string) {
	var top uint64
	for _, i := range hist.acked {
		top = max(top, i)
	}
	waitLong(c.t, fmt.Sprintf("%v to apply group %d to %d", names, g, top), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range names {
			sm := c.sms[n][g]
			sm.mu.Lock()
			done := sm.sm.last >= top
			sm.mu.Unlock()
			if !done {
				return false
			}
		}
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	check := map[uint64]*testSM{}
	for _, n := range names {
		sm := c.sms[n][g]
		sm.mu.Lock()
		defer sm.mu.Unlock()
		sm.sm.applied = sm.sm.last
		check[NodeID(n)] = sm.sm
	}
	if err := hist.check(check); err != nil {
		c.t.Fatalf("group %d: %v", g, err)
	}
}

// proposeMany proposes n entries in group g from workers goroutines.
func (c *testCluster) proposeMany(g uint64, hist *history, prefix string, n, workers int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				data, idx := c.propose(g, fmt.Sprintf("%s%d", prefix, i))
				if data == "" {
					return
				}
				mu.Lock()
				hist.acked[data] = idx
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if c.t.Failed() {
		c.t.FailNow()
	}
}

// TestNodesFailover runs three Nodes over TCP with mutual TLS, each with
// the metadata group and two partition groups: 1,000 entries are
// committed in group 1, its leader is stopped, a new leader is elected
// and takes more, every acknowledged entry is on both survivors, and the
// stopped node, started again from its directory, catches up with all of
// them (by snapshot or log) and the invariants hold on all three.
func TestNodesFailover(t *testing.T) {
	base := runtime.NumGoroutine()
	c := newTestCluster(t, "n1", "n2", "n3")
	hists := map[uint64]*history{0: newHistory(), 1: newHistory(), 2: newHistory()}
	c.proposeMany(0, hists[0], "meta", 20, 2)
	c.proposeMany(2, hists[2], "p2-", 20, 2)
	c.proposeMany(1, hists[1], "a", 1000, 8)
	old := c.leader(1)
	c.stop(old)
	var survivors []string
	for _, n := range []string{"n1", "n2", "n3"} {
		if n != old {
			survivors = append(survivors, n)
		}
	}
	c.proposeMany(1, hists[1], "b", 100, 4)
	if l := c.leader(1); l == old || l == "" {
		t.Fatalf("group 1 led by %q after %s stopped", l, old)
	}
	c.check(1, hists[1], survivors...)
	c.start(old)
	c.proposeMany(1, hists[1], "c", 10, 1)
	for g, h := range hists {
		c.check(g, h, "n1", "n2", "n3")
	}
	// The leader compacted past the stopped node's log while it was down
	// (SnapshotEvery 100, 100 entries), so it caught up by a snapshot sent
	// over the transport, after the one it restored at open.
	c.mu.Lock()
	restores := c.sms[old][1].sm.restores
	c.mu.Unlock()
	if restores < 2 {
		t.Fatalf("%s restored %d snapshots in group 1, want one at open and one from the leader", old, restores)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if s := c.node(n).Stats(); s.Transport.Refused+s.Transport.Forged+s.Transport.BadFrames != 0 {
			t.Fatalf("%s refused links of its own cluster: %+v", n, s)
		}
	}
	c.stopAll()
	waitLong(t, fmt.Sprintf("goroutines back to %d", base), func() bool { return runtime.NumGoroutine() <= base })
}

// TestNodeConfig: NewNode refuses a config it cannot run.
func TestNodeConfig(t *testing.T) {
	sm := func(uint64) (StateMachine, error) { return newTestSM(), nil }
	good := NodeConfig{Name: "n1", Listen: "127.0.0.1:0", Dir: t.TempDir(), NewStateMachine: sm,
		Seeds: []PeerConfig{{Name: "n2", Addr: "127.0.0.1:1"}}, Groups: []uint64{1, 2}}
	if _, err := NewNode(good); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(*NodeConfig)
	}{
		{"no name", func(c *NodeConfig) { c.Name = "" }},
		{"a name that is no DNS label", func(c *NodeConfig) { c.Name = "n 1" }},
		{"a seed name that is no DNS label", func(c *NodeConfig) { c.Seeds = []PeerConfig{{Name: "n2.x", Addr: "a:1"}} }},
		{"no state machine", func(c *NodeConfig) { c.NewStateMachine = nil }},
		{"itself as a seed", func(c *NodeConfig) { c.Seeds = append(c.Seeds, PeerConfig{Name: "n1", Addr: "x:1"}) }},
		{"a seed twice", func(c *NodeConfig) { c.Seeds = append(c.Seeds, c.Seeds[0]) }},
		{"a seed without address", func(c *NodeConfig) { c.Seeds = []PeerConfig{{Name: "n2"}} }},
		{"the metadata group as a partition", func(c *NodeConfig) { c.Groups = []uint64{0} }},
		{"a group twice", func(c *NodeConfig) { c.Groups = []uint64{3, 3} }},
		{"a frame too small for an entry", func(c *NodeConfig) { c.Transport.MaxFrame = DefaultMaxEntryBytes }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := good
			cfg.Seeds = append([]PeerConfig(nil), good.Seeds...)
			c.edit(&cfg)
			if _, err := NewNode(cfg); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// confChangeAll applies cc in every group, retrying on whichever node
// leads it until one try is applied (a retry of a try whose outcome is
// unknown changes nothing: adding a voter twice, or removing one twice).
func (c *testCluster) confChangeAll(cc *pb.ConfChangeV2) {
	for _, g := range []uint64{0, 1, 2} {
		for attempt := 0; ; attempt++ {
			if attempt == 200 {
				c.t.Fatalf("conf change %v in group %d: no success in 200 tries", cc, g)
			}
			var lead string
			waitLong(c.t, fmt.Sprintf("a leader of group %d", g), func() bool { lead = c.leader(g); return lead != "" })
			nd := c.node(lead)
			if nd == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err := nd.Group(g).ProposeConfChange(ctx, cc)
			cancel()
			if err == nil {
				break
			}
			if !errors.Is(err, ErrConfChangeRefused) && !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrLeaderChanged) &&
				!errors.Is(err, ErrClosed) && !errors.Is(err, context.DeadlineExceeded) {
				c.t.Fatalf("conf change %v in group %d: %v", cc, g, err)
			}
			time.Sleep(20 * time.Millisecond) // a refused change waits for the last one to apply
		}
	}
}

// TestNodesAddRemove grows a 3-node cluster over TCP and mutual TLS to
// four (the new node joins from an empty directory, linked by AddPeer,
// added by a conf change in every group, and catches up with every
// acknowledged entry), then removes the first node by a conf change and
// stops it. With n1 gone from the configuration, a second node stopped
// leaves two of three voters: group 1 still commits, which it could not
// if n1 were still a voter (two of four).
func TestNodesAddRemove(t *testing.T) {
	c := newTestClusterJoin(t, []string{"n1", "n2", "n3"}, []string{"n4"})
	hist := newHistory()
	c.proposeMany(1, hist, "a", 100, 4)
	c.start("n4")
	for _, n := range []string{"n1", "n2", "n3"} {
		if err := c.node(n).AddPeer(PeerConfig{Name: "n4", Addr: c.cfgs["n4"].Listen}); err != nil {
			t.Fatal(err)
		}
	}
	c.confChangeAll(confChange(pb.ConfChangeType_ConfChangeAddNode, NodeID("n4")))
	c.proposeMany(1, hist, "b", 100, 4)
	c.check(1, hist, "n1", "n2", "n3", "n4")

	c.confChangeAll(confChange(pb.ConfChangeType_ConfChangeRemoveNode, NodeID("n1")))
	c.stop("n1")
	for _, n := range []string{"n2", "n3", "n4"} {
		c.node(n).RemovePeer("n1")
	}
	c.proposeMany(1, hist, "c", 50, 4)
	c.check(1, hist, "n2", "n3", "n4")
	c.stop("n2")
	c.proposeMany(1, hist, "d", 20, 2)
	c.check(1, hist, "n3", "n4")
}

// TestNodeTransferLeadership: a node that leads groups hands each to a
// follower before it stops, so the survivors have a leader the moment it
// is gone, and every acknowledged entry is on them.
func TestNodeTransferLeadership(t *testing.T) {
	c := newTestCluster(t, "n1", "n2", "n3")
	hist := newHistory()
	c.proposeMany(1, hist, "a", 50, 4)
	for _, g := range []uint64{0, 2} {
		c.proposeMany(g, newHistory(), "x", 1, 1) // every group has a leader
	}
	old := c.leader(1)
	nd := c.node(old)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := nd.TransferLeadership(ctx); err != nil {
		t.Fatal(err)
	}
	for _, g := range []uint64{0, 1, 2} {
		if l := nd.Group(g).Leader(); l == nd.ID() || l == 0 {
			t.Fatalf("group %d: %s still sees leader %d after the transfer", g, old, l)
		}
	}
	c.stop(old)
	var survivors []string
	for _, n := range []string{"n1", "n2", "n3"} {
		if n != old {
			survivors = append(survivors, n)
		}
	}
	// The new leader knew it before old stopped: no election was needed.
	if l := c.leader(1); l == "" || l == old {
		t.Fatalf("group 1 has no leader among %v right after %s stopped", survivors, old)
	}
	c.proposeMany(1, hist, "b", 20, 2)
	c.check(1, hist, survivors...)
}

// TestProposeRefusesEntryOverMaxEntry: an entry larger than a frame can
// carry would be committed nowhere and jam the group's replication (the
// leader would resend the same oversized append for ever), so Propose
// refuses it with ErrTooLarge, and the group goes on committing.
func TestProposeRefusesEntryOverMaxEntry(t *testing.T) {
	c := newTestCluster(t, "n1", "n2", "n3")
	hist := newHistory()
	c.proposeMany(1, hist, "a", 5, 1)
	lead := c.node(c.leader(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := make([]byte, DefaultMaxEntryBytes+1)
	if _, err := lead.Group(1).Propose(ctx, big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("proposing %d bytes: %v, want ErrTooLarge", len(big), err)
	}
	// The largest entry allowed goes through the raft log and a frame
	// (retried, a new value each time, while the outcome is unknown: a
	// slow fsync of it can cost the leadership).
	for attempt := 0; ; attempt++ {
		if attempt == 30 {
			t.Fatalf("proposing %d bytes: no success in 30 tries", DefaultMaxEntryBytes)
		}
		big[0] = byte(attempt)
		var nd *Node
		waitLong(t, "a leader of group 1", func() bool { nd = c.node(c.leader(1)); return nd != nil })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		idx, err := nd.Group(1).Propose(ctx, big[:DefaultMaxEntryBytes])
		cancel()
		if err == nil {
			hist.acked[string(big[:DefaultMaxEntryBytes])] = idx
			break
		}
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrLeaderChanged) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("proposing %d bytes: %v", DefaultMaxEntryBytes, err)
		}
	}
	c.proposeMany(1, hist, "b", 5, 1)
	c.check(1, hist, "n1", "n2", "n3")
}

// TestNodesPeersFromMetadata: a node joins with no AddPeer anywhere: a
// peer record committed in the metadata group links every member to it
// (each node's book lists it, on disk too), a conf change then adds it to
// the groups and it catches up with every acknowledged entry. Without
// the book's links the members never reach it and the check times out.
func TestNodesPeersFromMetadata(t *testing.T) {
	c := newTestClusterJoin(t, []string{"n1", "n2", "n3"}, []string{"n4"})
	hist := newHistory()
	c.proposeMany(1, hist, "a", 50, 4)
	c.start("n4")
	p := PeerConfig{Name: "n4", Addr: c.cfgs["n4"].Listen}
	for attempt := 0; ; attempt++ {
		if attempt == 200 {
			t.Fatal("peer record: no success in 200 tries")
		}
		var lead string
		waitLong(t, "a leader of the metadata group", func() bool { lead = c.leader(MetaGroup); return lead != "" })
		nd := c.node(lead)
		if nd == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := nd.ProposePeer(ctx, p)
		cancel()
		if err == nil {
			break
		}
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrLeaderChanged) && !errors.Is(err, ErrClosed) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("peer record: %v", err)
		}
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		waitLong(t, n+" to book n4", func() bool { return c.node(n).Peers()["n4"] == p.Addr })
		b, err := os.ReadFile(filepath.Join(c.cfgs[n].Dir, "peers.json"))
		if err != nil || !strings.Contains(string(b), p.Addr) {
			t.Fatalf("%s's saved peer book %q (%v) lacks n4", n, b, err)
		}
	}
	c.confChangeAll(confChange(pb.ConfChangeType_ConfChangeAddNode, NodeID("n4")))
	c.proposeMany(1, hist, "b", 50, 4)
	c.check(1, hist, "n1", "n2", "n3", "n4")
}

// TestPeerBookRestoreKeepsInner: a metadata snapshot carries the peer
// book beside the caller's state; restoring it gives both back, and a
// malformed peer record or a snapshot too short for its book is refused.
func TestPeerBookRestoreKeepsInner(t *testing.T) {
	var linked []string
	link := func(p PeerConfig) error { linked = append(linked, p.Name); return nil }
	a, err := openPeerBook(t.TempDir(), "n1", newTestSM(), link)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(1, []byte("x")); err != nil {
		t.Fatal(err)
	}
	for i, p := range []PeerConfig{{"n1", "h:1"}, {"n2", "h:2"}} {
		if err := a.Apply(uint64(2+i), peerRecord(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Apply(4, append(append([]byte(nil), peerPrefix...), "bad name@"...)); err == nil {
		t.Fatal("a malformed peer record was applied")
	}
	snap, err := a.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	inner := newTestSM()
	b, err := openPeerBook(t.TempDir(), "n3", inner, link)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Restore(3, snap); err != nil {
		t.Fatal(err)
	}
	if got := b.peerList(); got["n1"] != "h:1" || got["n2"] != "h:2" || len(got) != 2 {
		t.Fatalf("restored book %v", got)
	}
	if inner.byIndex[1] != "x" || inner.last != 3 {
		t.Fatalf("restored inner state %v at %d", inner.byIndex, inner.last)
	}
	if strings.Join(linked, ",") != "n2,n1,n2" && strings.Join(linked, ",") != "n2,n2,n1" {
		t.Fatalf("linked %v: want n2 (n1 is the first book's own), then n1 and n2", linked)
	}
	if err := b.Restore(5, []byte{0, 0, 1, 0}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("restore of a truncated book: %v, want ErrCorrupt", err)
	}
}

// TestNodesSnapshotOverFrame: a follower stopped while its group took
// and compacted several frames' worth of entries catches up, when it
// starts again, from a snapshot larger than one transport frame, sent
// in chunks (with snapshots capped at one frame, it never would).
func TestNodesSnapshotOverFrame(t *testing.T) {
	c := newTestClusterWith(t, []string{"n1", "n2", "n3"}, nil, func(cfg *NodeConfig) {
		cfg.MaxEntryBytes, cfg.SnapshotEvery = 256<<10, 10
		cfg.Transport.MaxFrame = 3 << 20
	})
	hist := newHistory()
	c.proposeMany(1, hist, "a", 10, 2)
	c.check(1, hist, "n1", "n2", "n3")
	c.stop("n3")
	pad := strings.Repeat("p", 200<<10)
	for i := 0; i < 40; i++ { // 8 MB of state: the snapshot is over two frames
		data, idx := c.propose(1, fmt.Sprintf("b%d-%s", i, pad))
		if data == "" {
			t.FailNow()
		}
		hist.acked[data] = idx
	}
	c.start("n3")
	c.check(1, hist, "n1", "n2", "n3")
	var sent uint64
	for _, n := range []string{"n1", "n2"} {
		sent += c.node(n).Stats().Transport.SnapshotsSent
	}
	if got := c.node("n3").Stats().Transport.SnapshotsReceived; got == 0 || sent == 0 {
		t.Fatalf("n3 received %d chunked snapshots (%d sent): it did not catch up from one", got, sent)
	}
}
