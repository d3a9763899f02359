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

	"github.com/fibrilmq/fibril/server/seglog"
	"go.etcd.io/raft/v3"
)

// asyncCluster is three Groups over a chanNet, each on a gated file
// system, with their state machines.
type asyncCluster struct {
	net    *chanNet
	groups map[uint64]*Group
	sms    map[uint64]*lockedSM
	fss    map[uint64]*gateFS
}

func newAsyncCluster(t *testing.T, cfg Config) *asyncCluster {
	t.Helper()
	base := t.TempDir()
	c := &asyncCluster{net: &chanNet{groups: map[uint64]*Group{}}, groups: map[uint64]*Group{}, sms: map[uint64]*lockedSM{}, fss: map[uint64]*gateFS{}}
	peers := []uint64{1, 2, 3}
	if cfg.ElectionTicks == 0 {
		cfg.ElectionTicks = 50 // 100 ms: no spurious election under a loaded -race run
	}
	for _, id := range peers {
		cfg := cfg
		cfg.ID, cfg.Peers, cfg.Dir = id, peers, filepath.Join(base, strconv.Itoa(int(id)))
		c.fss[id] = &gateFS{FS: seglog.OSFS()}
		cfg.FS = c.fss[id]
		c.sms[id] = &lockedSM{sm: newTestSM()}
		g, err := OpenGroup(cfg, c.sms[id], c.net, 2*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		c.net.set(id, g)
		c.groups[id] = g
	}
	t.Cleanup(func() {
		for _, fs := range c.fss {
			fs.open()
		}
		for _, g := range c.groups {
			g.Close()
		}
	})
	return c
}

func (c *asyncCluster) leader(t *testing.T) uint64 {
	t.Helper()
	var lead uint64
	waitFor(t, "a leader", func() bool {
		lead = c.groups[1].Leader()
		return lead != 0 && c.groups[lead].Leader() == lead
	})
	return lead
}

// asyncResult collects done callbacks.
type asyncResult struct {
	mu   sync.Mutex
	idx  []uint64
	errs []error
	n    int
}

func (r *asyncResult) done(index uint64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	r.idx = append(r.idx, index)
}

func (r *asyncResult) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// TestProposeAsync: proposals that do not wait end by their callback,
// once each: on the leader applied in order at increasing indexes; on a
// follower ErrNotLeader; too large, over the pending bound or on a
// closed group refused at once with no callback; queued or in flight
// when the group closes, ErrClosed.
func TestProposeAsync(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		run  func(t *testing.T, c *asyncCluster, lead uint64)
	}{
		{"leader applies in order", Config{}, func(t *testing.T, c *asyncCluster, lead uint64) {
			var r asyncResult
			const n = 300
			for i := 0; i < n; i++ {
				if err := c.groups[lead].ProposeAsync([]byte(fmt.Sprintf("a%d", i)), r.done); err != nil {
					t.Fatalf("proposal %d: %v", i, err)
				}
			}
			waitFor(t, "every callback", func() bool { return r.count() == n })
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.errs) > 0 {
				t.Fatalf("errors: %v", r.errs[0])
			}
			sm := c.sms[lead]
			sm.mu.Lock()
			defer sm.mu.Unlock()
			for i, idx := range r.idx {
				if i > 0 && idx <= r.idx[i-1] {
					t.Fatalf("callback %d index %d after %d", i, idx, r.idx[i-1])
				}
				if got, want := sm.sm.byIndex[idx], fmt.Sprintf("a%d", i); got != want {
					t.Fatalf("index %d holds %q, want %q", idx, got, want)
				}
			}
		}},
		{"follower refuses", Config{}, func(t *testing.T, c *asyncCluster, lead uint64) {
			f := lead%3 + 1
			var r asyncResult
			if err := c.groups[f].ProposeAsync([]byte("x"), r.done); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the callback", func() bool { return r.count() == 1 })
			if len(r.errs) != 1 || !errors.Is(r.errs[0], ErrNotLeader) {
				t.Fatalf("follower proposal: %v, want ErrNotLeader", r.errs)
			}
		}},
		{"too large", Config{MaxEntryBytes: 100}, func(t *testing.T, c *asyncCluster, lead uint64) {
			var r asyncResult
			if err := c.groups[lead].ProposeAsync(make([]byte, 101), r.done); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("got %v, want ErrTooLarge", err)
			}
			if err := c.groups[lead].ProposeAsync(make([]byte, 100), r.done); err != nil {
				t.Fatalf("at the bound: %v", err)
			}
			waitFor(t, "the callback", func() bool { return r.count() == 1 })
		}},
		{"pending bound", Config{MaxPendingProposals: 3}, func(t *testing.T, c *asyncCluster, lead uint64) {
			c.fss[lead].shut() // the leader cannot apply: proposals stay pending
			var r asyncResult
			for i := 0; i < 3; i++ {
				if err := c.groups[lead].ProposeAsync([]byte{byte(i)}, r.done); err != nil {
					t.Fatalf("proposal %d: %v", i, err)
				}
			}
			if err := c.groups[lead].ProposeAsync([]byte("over"), r.done); !errors.Is(err, ErrBusy) {
				t.Fatalf("past the bound: %v, want ErrBusy", err)
			}
			c.fss[lead].open()
			waitFor(t, "the callbacks", func() bool { return r.count() == 3 })
			if err := c.groups[lead].ProposeAsync([]byte("again"), r.done); err != nil {
				t.Fatalf("after the pending ones ended: %v", err)
			}
			waitFor(t, "the last callback", func() bool { return r.count() == 4 })
		}},
		{"close ends pending", Config{}, func(t *testing.T, c *asyncCluster, lead uint64) {
			c.fss[lead].shut()
			var r asyncResult
			for i := 0; i < 5; i++ {
				if err := c.groups[lead].ProposeAsync([]byte{byte(i)}, r.done); err != nil {
					t.Fatalf("proposal %d: %v", i, err)
				}
			}
			waitFor(t, "the leader's fsync to hang", func() bool { return c.fss[lead].waiting.Load() > 0 })
			closed := make(chan error, 1)
			go func() { closed <- c.groups[lead].Close() }()
			waitFor(t, "the loop to stop", func() bool {
				select {
				case <-c.groups[lead].donec:
					return true
				default:
					return false
				}
			})
			c.fss[lead].open()
			<-closed
			if r.count() != 5 {
				t.Fatalf("%d callbacks after Close, want 5", r.count())
			}
			for _, err := range r.errs {
				if !errors.Is(err, ErrClosed) {
					t.Fatalf("pending at close: %v, want ErrClosed", err)
				}
			}
			if err := c.groups[lead].ProposeAsync([]byte("late"), r.done); !errors.Is(err, ErrClosed) {
				t.Fatalf("after close: %v, want ErrClosed", err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newAsyncCluster(t, tc.cfg)
			tc.run(t, c, c.leader(t))
		})
	}
}

// TestGroupCloseConcurrent: two Closes at once (a test's crash and its
// cleanup; a broker's and its owner's) close the storage once and
// both return; before the fix the second raced the first over the
// pending proposals and closed the raft log twice.
func TestGroupCloseConcurrent(t *testing.T) {
	c := newAsyncCluster(t, Config{})
	lead := c.leader(t)
	var r asyncResult
	for i := 0; i < 20; i++ {
		if err := c.groups[lead].ProposeAsync([]byte{byte(i)}, r.done); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() { errs <- c.groups[lead].Close() }()
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
	}
	if r.count() != 20 {
		t.Fatalf("%d callbacks after Close, want 20", r.count())
	}
}

// TestCompactBehindMatch: with CompactBehindMatch a leader whose
// follower is stopped keeps every raft log entry that follower lacks,
// so it catches up from the log (no snapshot sent); without it the
// leader compacts past the follower.
func TestCompactBehindMatch(t *testing.T) {
	for _, guard := range []bool{true, false} {
		t.Run(fmt.Sprintf("guard=%v", guard), func(t *testing.T) {
			c := newAsyncCluster(t, Config{SnapshotEvery: 10, CompactBehindMatch: guard})
			lead := c.leader(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := c.groups[lead].Propose(ctx, []byte("first")); err != nil {
				t.Fatal(err)
			}
			f := lead%3 + 1
			waitFor(t, "the follower to apply", func() bool {
				c.sms[f].mu.Lock()
				defer c.sms[f].mu.Unlock()
				return c.sms[f].sm.last > 0
			})
			c.net.set(f, nil) // cut off: its match index stays
			st, err := c.groups[lead].Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			match := st.Match[f]
			for i := 0; i < 200; i++ {
				if _, err := c.groups[lead].Propose(ctx, []byte(fmt.Sprintf("p%d", i))); err != nil {
					t.Fatal(err)
				}
			}
			first, _ := c.groups[lead].r.st.FirstIndex()
			if guard && first > match+1 {
				t.Fatalf("leader compacted to %d, past the stopped follower's match %d", first, match)
			}
			if !guard && first <= match+1 {
				t.Fatalf("without the guard the leader kept its log from %d (match %d): the test shows nothing", first, match)
			}
		})
	}
}

// TestCompactionWaitsForRaftApplied: a follower's apply worker that
// applied past a snapshot point before the loop told raft so does not
// compact the raft log yet: raft, campaigning meanwhile, scans its
// unapplied committed entries for conf changes, and before the fix it
// found them compacted away and panicked ("requested index is
// unavailable due to compaction"; seen in TestGroupLeaderKill). The
// snapshot is stored once raft knows its index applied.
func TestCompactionWaitsForRaftApplied(t *testing.T) {
	s := newSimWith(t, 3, 11, simOpts{snapshotEvery: 5})
	defer s.closeAll()
	s.net.lossless = true
	n1, n2 := s.nodes[0], s.nodes[1]
	var held []*applyJob // n2's apply jobs, run but not handed back
	pump := func() {
		for i := 0; i < 10000; i++ {
			busy := false
			if m := s.net.pop(); m != nil {
				busy = true
				if nd := s.node(m.GetTo()); nd != nil && nd.r != nil {
					_ = nd.r.rn.Step(m)
					s.process(nd)
				}
			}
			for _, nd := range s.nodes {
				r := nd.r
				if len(r.appendq) > 0 {
					busy = true
					batch := r.appendq
					r.appendq = nil
					err := r.persist(batch)
					for _, m := range batch {
						if err := r.appendDone(m, err); err != nil {
							t.Fatal(err)
						}
					}
				}
				for len(r.applyq) > 0 {
					busy = true
					j := r.applyq[0]
					r.applyq = r.applyq[1:]
					j.err = r.ap.run(j)
					if nd == n2 && held != nil {
						held = append(held, j)
						continue
					}
					if err := r.applyDone(j); err != nil {
						t.Fatal(err)
					}
				}
				s.process(nd)
			}
			if !busy && len(s.net.queue) == 0 {
				return
			}
		}
		t.Fatal("no quiet in 10000 steps")
	}
	s.campaign(n1)
	pump()
	if n1.r.rn.BasicStatus().RaftState != raft.StateLeader {
		t.Fatal("node 1 did not win")
	}
	held = []*applyJob{}
	for i := 0; i < 12; i++ {
		if _, err := n1.r.propose([]byte(fmt.Sprintf("c%d", i))); err != nil {
			t.Fatal(err)
		}
		s.process(n1)
		pump()
	}
	if len(held) == 0 || n2.r.ap.applied < 10 {
		t.Fatalf("node 2 applied %d in %d held jobs: the test shows nothing", n2.r.ap.applied, len(held))
	}
	first, _ := n2.r.st.FirstIndex()
	if acked := n2.r.ap.acked.Load(); first > acked+1 {
		t.Fatalf("node 2 compacted to %d while raft knew only %d applied", first, acked)
	}
	func() {
		defer func() {
			if v := recover(); v != nil {
				t.Fatalf("campaign on node 2: %v", v)
			}
		}()
		_ = n2.r.rn.Campaign()
	}()
	for _, j := range held {
		if err := n2.r.applyDone(j); err != nil {
			t.Fatal(err)
		}
	}
	held = nil
	s.process(n2)
	pump()
	if leader := s.leader(); leader != nil {
		if _, err := leader.r.propose([]byte("after")); err != nil {
			t.Fatal(err)
		}
		s.process(leader)
		pump()
	}
	if first, _ := n2.r.st.FirstIndex(); first <= 5 {
		t.Fatalf("node 2 never compacted once raft knew: first index %d", first)
	}
}
