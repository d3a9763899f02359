package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// lockedSM guards a testSM: Group applies on its goroutine, the test reads.
type lockedSM struct {
	mu sync.Mutex
	sm *testSM
}

func (l *lockedSM) Apply(i uint64, d []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sm.Apply(i, d)
}
func (l *lockedSM) Applied() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sm.Applied()
}
func (l *lockedSM) Snapshot() ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sm.Snapshot()
}
func (l *lockedSM) Restore(i uint64, d []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sm.Restore(i, d)
}

// chanNet delivers messages straight to the target group's Step.
type chanNet struct {
	mu     sync.Mutex
	groups map[uint64]*Group
}

func (*chanNet) ReportsSnapshots() bool { return false }

func (n *chanNet) Send(msgs []*pb.Message) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range msgs {
		if g := n.groups[m.GetTo()]; g != nil {
			g.Step(m)
		}
	}
}

func (n *chanNet) set(id uint64, g *Group) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.groups[id] = g
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestGroupLeaderKill runs three Groups on their own goroutines: proposals
// on the leader return once applied; the leader is closed, a new one is
// elected and takes proposals; the old one reopens from its directory and
// catches up with every acknowledged entry.
func TestGroupLeaderKill(t *testing.T) {
	base := t.TempDir()
	net := &chanNet{groups: map[uint64]*Group{}}
	peers := []uint64{1, 2, 3}
	sms := map[uint64]*lockedSM{}
	leads := make(chan uint64, 100)
	open := func(id uint64) *Group {
		sms[id] = &lockedSM{sm: newTestSM()}
		g, err := OpenGroup(Config{ID: id, Peers: peers, Dir: filepath.Join(base, strconv.Itoa(int(id))), SnapshotEvery: 15,
			OnLeader: func(lead, _ uint64) {
				select {
				case leads <- lead:
				default:
				}
			}}, sms[id], net, 2*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		net.set(id, g)
		return g
	}
	groups := map[uint64]*Group{}
	for _, id := range peers {
		groups[id] = open(id)
	}
	defer func() {
		for _, g := range groups {
			g.Close()
		}
	}()
	hist := newHistory()
	proposeAll := func(from, n int) {
		for i := from; i < from+n; i++ {
			data := fmt.Sprintf("g%d", i)
			for attempt := 0; ; attempt++ {
				var lead uint64
				waitFor(t, "a leader", func() bool {
					for _, g := range groups {
						if l := g.Leader(); l != 0 && groups[l] != nil {
							lead = l
							return true
						}
					}
					return false
				})
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				idx, err := groups[lead].Propose(ctx, []byte(data))
				cancel()
				if err == nil {
					hist.acked[data] = idx
					break
				}
				if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrLeaderChanged) && !errors.Is(err, context.DeadlineExceeded) || attempt > 20 {
					t.Fatalf("propose %s: %v", data, err)
				}
				data = fmt.Sprintf("g%d-retry%d", i, attempt) // outcome unknown: a new value
			}
		}
	}
	proposeAll(0, 20)
	var old uint64
	for _, g := range groups {
		if l := g.Leader(); l != 0 {
			old = l
		}
	}
	if err := groups[old].Close(); err != nil {
		t.Fatal(err)
	}
	net.set(old, nil)
	delete(groups, old)
	proposeAll(20, 20)
	groups[old] = open(old)
	var top uint64
	for _, i := range hist.acked {
		top = max(top, i)
	}
	waitFor(t, "every replica to apply every acknowledged entry", func() bool {
		for _, id := range peers {
			l := sms[id]
			l.mu.Lock()
			caught := l.sm.last >= top
			l.mu.Unlock()
			if !caught {
				return false
			}
		}
		return true
	})
	check := map[uint64]*testSM{}
	for _, id := range peers {
		sms[id].mu.Lock()
		defer sms[id].mu.Unlock()
		sms[id].sm.applied = sms[id].sm.last
		check[id] = sms[id].sm
	}
	if err := hist.check(check); err != nil {
		t.Fatal(err)
	}
	if len(leads) == 0 {
		t.Fatal("OnLeader never called")
	}
}

// TestGroupStatus: the leader's status names itself, counts its
// campaign, and has every replica's match index, at or past an entry
// committed on all; a follower names the leader and has no match map; a
// closed group answers ErrClosed.
func TestGroupStatus(t *testing.T) {
	base := t.TempDir()
	net := &chanNet{groups: map[uint64]*Group{}}
	peers := []uint64{1, 2, 3}
	groups := map[uint64]*Group{}
	sms := map[uint64]*lockedSM{}
	for _, id := range peers {
		sms[id] = &lockedSM{sm: newTestSM()}
		g, err := OpenGroup(Config{ID: id, Peers: peers, Dir: filepath.Join(base, strconv.Itoa(int(id)))}, sms[id], net, 2*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		net.set(id, g)
		groups[id] = g
	}
	defer func() {
		for _, g := range groups {
			g.Close()
		}
	}()
	var lead uint64
	var idx uint64
	waitFor(t, "a proposal committed", func() bool {
		if lead = groups[1].Leader(); lead == 0 {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		i, err := groups[lead].Propose(ctx, []byte("x"))
		idx = i
		return err == nil
	})
	waitFor(t, "every replica to apply it", func() bool {
		for _, sm := range sms {
			if sm.Applied() < idx {
				return false
			}
		}
		return true
	})
	ctx := context.Background()
	waitFor(t, "the leader to know every match", func() bool {
		st, err := groups[lead].Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Role != "leader" || st.Leader != lead || st.ID != lead || st.Campaigns == 0 || st.Commit < idx || st.Applied < idx || st.Last < st.Commit || len(st.Match) != 3 {
			t.Fatalf("leader status %+v", st)
		}
		for _, m := range st.Match {
			if m < idx {
				return false
			}
		}
		return true
	})
	for _, id := range peers {
		if id == lead {
			continue
		}
		st, err := groups[id].Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Role != "follower" || st.Leader != lead || st.Match != nil {
			t.Fatalf("follower %d status %+v", id, st)
		}
	}
	groups[lead].Close()
	if _, err := groups[lead].Status(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("status of a closed group: %v", err)
	}
}

// TestGroupReportUnreachable: a follower gone and reported unreachable
// is probed, not streamed to, by the leader.
func TestGroupReportUnreachable(t *testing.T) {
	base := t.TempDir()
	net := &chanNet{groups: map[uint64]*Group{}}
	peers := []uint64{1, 2, 3}
	groups := map[uint64]*Group{}
	for _, id := range peers {
		g, err := OpenGroup(Config{ID: id, Peers: peers, Dir: filepath.Join(base, strconv.Itoa(int(id)))},
			&lockedSM{sm: newTestSM()}, net, 2*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		net.set(id, g)
		groups[id] = g
	}
	defer func() {
		for _, g := range groups {
			g.Close()
		}
	}()
	ctx := context.Background()
	var lead, follower uint64
	progress := func() map[uint64]string {
		st, err := groups[lead].Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Progress
	}
	waitFor(t, "a leader replicating to both followers", func() bool {
		if lead = groups[1].Leader(); lead == 0 {
			return false
		}
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		groups[lead].Propose(ctx, []byte(fmt.Sprint("x", time.Now().UnixNano())))
		p := progress()
		n := 0
		for id, s := range p {
			if id != lead && s == "replicate" {
				n, follower = n+1, id
			}
		}
		return n == 2
	})
	// Gone both ways: an answer it sent before would put it back to
	// replicate, so the report is repeated until none is left in flight.
	net.set(follower, nil)
	groups[follower].Close()
	delete(groups, follower)
	waitFor(t, "the follower probed", func() bool {
		groups[lead].ReportUnreachable(follower)
		return progress()[follower] == "probe"
	})
}

// TestGroupReadIndex: a read index on the leader or a follower returns
// only once that replica applied an entry committed before the read; a
// leader cut off from its followers never completes one.
func TestGroupReadIndex(t *testing.T) {
	base := t.TempDir()
	net := &chanNet{groups: map[uint64]*Group{}}
	peers := []uint64{1, 2, 3}
	groups := map[uint64]*Group{}
	sms := map[uint64]*lockedSM{}
	for _, id := range peers {
		sms[id] = &lockedSM{sm: newTestSM()}
		g, err := OpenGroup(Config{ID: id, Peers: peers, Dir: filepath.Join(base, strconv.Itoa(int(id)))}, sms[id], net, 2*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		net.set(id, g)
		groups[id] = g
	}
	defer func() {
		for _, g := range groups {
			g.Close()
		}
	}()
	var lead, idx uint64
	waitFor(t, "a proposal committed", func() bool {
		if lead = groups[1].Leader(); lead == 0 {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		i, err := groups[lead].Propose(ctx, []byte("before the read"))
		idx = i
		return err == nil
	})
	for _, id := range peers {
		var got uint64
		waitFor(t, fmt.Sprintf("a read index on %d", id), func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			i, err := groups[id].ReadIndex(ctx)
			got = i
			return err == nil
		})
		sms[id].mu.Lock()
		data := sms[id].sm.byIndex[idx]
		sms[id].mu.Unlock()
		if got < idx || data != "before the read" {
			t.Fatalf("replica %d: read index %d, entry %d holds %q", id, got, idx, data)
		}
	}
	for _, id := range peers {
		if id != lead {
			net.set(id, nil)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if i, err := groups[lead].ReadIndex(ctx); err == nil {
		t.Fatalf("a leader cut off from its quorum served a read at %d", i)
	}
}

// gatedSM is a lockedSM whose Restore waits for its gate (a state machine
// fetching its data from a peer).
type gatedSM struct {
	lockedSM
	gate     chan struct{}
	entered  chan struct{}
	restored chan uint64
}

func (g *gatedSM) Restore(i uint64, d []byte) error {
	close(g.entered)
	<-g.gate
	if err := g.lockedSM.Restore(i, d); err != nil {
		return err
	}
	g.restored <- i
	return nil
}

// TestOpenRestoresOnApplyWorker: a replica reopened with a state machine
// behind its latest snapshot opens at once (the restore runs on the apply
// worker, not in OpenGroup), applies nothing before the restore ends, and
// the entries after the snapshot follow it.
func TestOpenRestoresOnApplyWorker(t *testing.T) {
	dir := t.TempDir()
	net := &chanNet{groups: map[uint64]*Group{}}
	cfg := Config{ID: 1, Peers: []uint64{1}, Dir: dir, SnapshotEvery: 4}
	sm := &lockedSM{sm: newTestSM()}
	g, err := OpenGroup(cfg, sm, net, 2*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	net.set(1, g)
	waitFor(t, "a leader", func() bool { return g.Leader() == 1 })
	var last uint64
	for i := 0; i < 10; i++ {
		if last, err = g.Propose(context.Background(), []byte(fmt.Sprintf("e%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	snap, err := func() (*pb.Snapshot, error) {
		st, err := OpenStorage(dir, nil)
		if err != nil {
			return nil, err
		}
		defer st.Close()
		return st.Snapshot()
	}()
	if err != nil || snap.GetMetadata().GetIndex() < 4 {
		t.Fatalf("snapshot at %d (%v), want one at 4 or later", snap.GetMetadata().GetIndex(), err)
	}
	gsm := &gatedSM{lockedSM: lockedSM{sm: newTestSM()}, gate: make(chan struct{}), entered: make(chan struct{}), restored: make(chan uint64, 1)}
	g, err = OpenGroup(cfg, gsm, net, 2*time.Millisecond) // returns with the restore still waiting
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	net.set(1, g)
	<-gsm.entered
	if got := gsm.Applied(); got != 0 {
		t.Fatalf("applied %d before the restore ended", got)
	}
	close(gsm.gate)
	if got := <-gsm.restored; got != snap.GetMetadata().GetIndex() {
		t.Fatalf("restored %d, want the snapshot's %d", got, snap.GetMetadata().GetIndex())
	}
	waitFor(t, "the entries after the snapshot", func() bool { return gsm.Applied() >= last })
	gsm.mu.Lock()
	defer gsm.mu.Unlock()
	if gsm.sm.bad != nil {
		t.Fatal(gsm.sm.bad)
	}
	for i := 0; i < 10; i++ {
		want := fmt.Sprintf("e%d", i)
		if _, ok := gsm.sm.seen[want]; !ok {
			t.Fatalf("%s missing after the restore and replay: %v", want, gsm.sm.byIndex)
		}
	}
}

// TestCompactBehindMatchSnapshotsOnceCaughtUp: under
// CompactBehindMatch a leader whose snapshot was held back by a
// follower that was away takes it once that follower caught up, though
// no entry comes after (an idle group never snapshotted, and a replica
// added after its last snapshot could never get one it may restore).
func TestCompactBehindMatchSnapshotsOnceCaughtUp(t *testing.T) {
	base := t.TempDir()
	net := &chanNet{groups: map[uint64]*Group{}}
	groups := map[uint64]*Group{}
	for _, id := range []uint64{1, 2, 3} {
		g, err := OpenGroup(Config{ID: id, Peers: []uint64{1, 2, 3}, Dir: filepath.Join(base, strconv.Itoa(int(id))), SnapshotEvery: 4,
			CompactBehindMatch: true}, &lockedSM{sm: newTestSM()}, net, 2*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		groups[id] = g
		net.set(id, g)
	}
	var lead uint64
	waitFor(t, "a leader", func() bool { lead = groups[1].Leader(); return lead != 0 })
	away := lead%3 + 1
	net.set(away, nil) // what is sent to it is lost
	var last uint64
	for i := 0; i < 12; i++ {
		var err error
		if last, err = groups[lead].Propose(context.Background(), []byte(fmt.Sprintf("p%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	snapAt := func() uint64 {
		s, _ := groups[lead].r.st.Snapshot()
		return s.GetMetadata().GetIndex()
	}
	if at := snapAt(); at >= last {
		t.Fatalf("snapshot at %d with a follower away since before %d", at, last)
	}
	net.set(away, groups[away])
	waitFor(t, "the leader's snapshot once the follower caught up", func() bool { return snapAt() >= last })
}
