package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
	pb "go.etcd.io/raft/v3/raftpb"
)

// gateFS is the operating system's file system whose file fsyncs wait,
// while the gate is shut, until it opens again.
type gateFS struct {
	seglog.FS
	mu      sync.Mutex
	gate    chan struct{} // nil: open
	waiting atomic.Int64  // fsyncs waiting at the gate
}

func (g *gateFS) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
}

func (g *gateFS) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
}

func (g *gateFS) OpenFile(name string, flag int, perm os.FileMode) (seglog.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return gateFile{f, g}, nil
}

type gateFile struct {
	seglog.File
	fs *gateFS
}

func (f gateFile) Sync() error {
	f.fs.mu.Lock()
	gate := f.fs.gate
	f.fs.mu.Unlock()
	if gate != nil {
		f.fs.waiting.Add(1)
		<-gate
		f.fs.waiting.Add(-1)
	}
	return f.File.Sync()
}

// countNet is chanNet counting the heartbeats each replica sends.
type countNet struct {
	chanNet
	beats sync.Map // from -> *atomic.Int64
}

func (n *countNet) Send(msgs []*pb.Message) {
	for _, m := range msgs {
		if m.GetType() == pb.MessageType_MsgHeartbeat {
			c, _ := n.beats.LoadOrStore(m.GetFrom(), new(atomic.Int64))
			c.(*atomic.Int64).Add(1)
		}
	}
	n.chanNet.Send(msgs)
}

func (n *countNet) beatsFrom(id uint64) int64 {
	c, ok := n.beats.Load(id)
	if !ok {
		return 0
	}
	return c.(*atomic.Int64).Load()
}

// TestGroupHeartbeatsDuringSlowFsync: while the leader's raft log fsync
// hangs (its append worker waits on it), the leader's loop goes on
// ticking and sending heartbeats, so its followers do not depose it; the
// proposal it holds completes once the fsync does. With writes in the
// raft loop the heartbeats stop with the fsync.
func TestGroupHeartbeatsDuringSlowFsync(t *testing.T) {
	base := t.TempDir()
	net := &countNet{chanNet: chanNet{groups: map[uint64]*Group{}}}
	peers := []uint64{1, 2, 3}
	fss := map[uint64]*gateFS{}
	groups := map[uint64]*Group{}
	for _, id := range peers {
		fss[id] = &gateFS{FS: seglog.OSFS()}
		g, err := OpenGroup(Config{ID: id, Peers: peers, Dir: filepath.Join(base, strconv.Itoa(int(id))), FS: fss[id], ElectionTicks: 50},
			&lockedSM{sm: newTestSM()}, net, 5*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		net.set(id, g)
		groups[id] = g
	}
	defer func() {
		for _, fs := range fss {
			fs.open()
		}
		for _, g := range groups {
			g.Close()
		}
	}()
	var lead uint64
	waitFor(t, "a leader", func() bool {
		lead = groups[1].Leader()
		return lead != 0 && groups[lead].Leader() == lead
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := groups[lead].Propose(ctx, []byte("before")); err != nil {
		t.Fatalf("propose before the gate: %v", err)
	}
	fss[lead].shut()
	done := make(chan error, 1)
	go func() {
		_, err := groups[lead].Propose(ctx, []byte("during"))
		done <- err
	}()
	waitFor(t, "the leader's fsync to hang", func() bool { return fss[lead].waiting.Load() > 0 })
	from := net.beatsFrom(lead)
	waitFor(t, "heartbeats while the fsync hangs", func() bool {
		return net.beatsFrom(lead) >= from+20 && fss[lead].waiting.Load() > 0
	})
	for _, id := range peers {
		if l := groups[id].Leader(); l != lead {
			t.Fatalf("replica %d sees leader %d during the fsync, want %d", id, l, lead)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("proposal completed while the leader's fsync hung: %v", err)
	default:
	}
	fss[lead].open()
	if err := <-done; err != nil {
		t.Fatalf("proposal after the fsync: %v", err)
	}
}

// TestLocalJobsBounded: a replica whose workers do not keep up holds at
// most maxLocalJobs jobs (one Ready's two over at most): process then
// takes no Ready, and raft keeps the rest until jobs are done, after
// which everything proposed is applied.
func TestLocalJobsBounded(t *testing.T) {
	s := newSim(t, 1, 5, false)
	defer s.closeAll()
	nd := s.nodes[0]
	s.campaign(nd)
	s.drain(nd)
	var ps []*Proposal
	for i := 0; i < 3*maxLocalJobs; i++ {
		p, err := nd.r.propose([]byte(strconv.Itoa(i)))
		if err != nil {
			t.Fatalf("proposal %d: %v", i, err)
		}
		ps = append(ps, p)
		s.process(nd)
		if held := len(nd.r.appendq) + len(nd.r.applyq); held > maxLocalJobs+2 || nd.r.jobs != held {
			t.Fatalf("after %d proposals %d jobs held (%d counted), bound %d", i+1, held, nd.r.jobs, maxLocalJobs)
		}
	}
	if nd.r.jobs < maxLocalJobs {
		t.Fatalf("only %d jobs held: the bound was never reached", nd.r.jobs)
	}
	for i := 0; i < 10000 && len(nd.r.appendq)+len(nd.r.applyq) > 0; i++ {
		s.work(nd)
	}
	for i, p := range ps {
		select {
		case <-p.Done:
			if p.Err != nil {
				t.Fatalf("proposal %d: %v", i, p.Err)
			}
		default:
			t.Fatalf("proposal %d not applied once the jobs were done", i)
		}
	}
}

// snapFailNet is chanNet reporting snapshot outcomes itself: it drops
// the first fail snapshots, reporting each failed, and delivers the
// rest, reporting them sent.
type snapFailNet struct {
	chanNet
	mu     sync.Mutex
	fail   int
	failed int
}

func (*snapFailNet) ReportsSnapshots() bool { return true }

func (n *snapFailNet) Send(msgs []*pb.Message) {
	var pass []*pb.Message
	for _, m := range msgs {
		if m.GetType() != pb.MessageType_MsgSnap {
			pass = append(pass, m)
			continue
		}
		n.mu.Lock()
		drop := n.failed < n.fail
		if drop {
			n.failed++
		}
		n.mu.Unlock()
		n.chanNet.mu.Lock()
		from := n.groups[m.GetFrom()]
		n.chanNet.mu.Unlock()
		if !drop {
			pass = append(pass, m)
		}
		// Reported from another goroutine, as a transport's sender would.
		go from.ReportSnapshot(m.GetTo(), !drop)
	}
	n.chanNet.Send(pass)
}

// TestGroupSnapshotFailureResent: when the transport reports a snapshot
// failed, raft sends another, and the follower behind catches up from
// it. Without the report reaching raft the leader waits in its snapshot
// state for an answer that never comes.
func TestGroupSnapshotFailureResent(t *testing.T) {
	base := t.TempDir()
	net := &snapFailNet{chanNet: chanNet{groups: map[uint64]*Group{}}, fail: 2}
	peers := []uint64{1, 2, 3}
	sms := map[uint64]*lockedSM{}
	groups := map[uint64]*Group{}
	open := func(id uint64) {
		sms[id] = &lockedSM{sm: newTestSM()}
		g, err := OpenGroup(Config{ID: id, Peers: peers, Dir: filepath.Join(base, strconv.Itoa(int(id))), SnapshotEvery: 5},
			sms[id], net, 2*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		net.set(id, g)
		groups[id] = g
	}
	for _, id := range peers {
		open(id)
	}
	defer func() {
		for _, g := range groups {
			g.Close()
		}
	}()
	var lead uint64
	waitFor(t, "a leader", func() bool {
		lead = groups[1].Leader()
		return lead != 0 && groups[lead].Leader() == lead
	})
	behind := peers[0]
	if behind == lead {
		behind = peers[1]
	}
	groups[behind].Close()
	net.set(behind, nil)
	delete(groups, behind)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var top uint64
	for i := 0; i < 30; i++ {
		idx, err := groups[lead].Propose(ctx, []byte(strconv.Itoa(i)))
		if err != nil {
			t.Fatalf("proposal %d: %v", i, err)
		}
		top = idx
	}
	open(behind)
	waitFor(t, "the follower to catch up from a snapshot", func() bool {
		return sms[behind].Applied() >= top
	})
	net.mu.Lock()
	defer net.mu.Unlock()
	if net.failed != net.fail {
		t.Fatalf("%d snapshots failed, want %d", net.failed, net.fail)
	}
}

// TestAppendJobsShareFsync: the append jobs waiting when the worker
// takes them (those queued while an fsync ran) are written with one
// fsync between them, the group commit the synchronous loop got from
// batching proposals into one Ready.
func TestAppendJobsShareFsync(t *testing.T) {
	s := newSim(t, 1, 5, false)
	defer s.closeAll()
	nd := s.nodes[0]
	s.campaign(nd)
	s.drain(nd)
	for i := 0; i < 10; i++ {
		if _, err := nd.r.propose([]byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		s.process(nd)
	}
	batch := nd.r.appendq
	if len(batch) < 10 {
		t.Fatalf("%d append jobs queued for 10 proposals", len(batch))
	}
	before, _ := nd.fs.SyncCounts()
	if err := nd.r.persist(batch); err != nil {
		t.Fatal(err)
	}
	if after, _ := nd.fs.SyncCounts(); after != before+1 {
		t.Fatalf("%d append jobs took %d fsyncs, want 1", len(batch), after-before)
	}
}
