package cluster

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/fibrilmq/fibril/internal/crashfs"
	"github.com/fibrilmq/fibril/server/seglog"
	pb "go.etcd.io/raft/v3/raftpb"
)

// addNode adds a node that will join by a conf change: its replica
// starts on an empty directory without bootstrapping.
func (s *sim) addNode() *simNode {
	id := uint64(len(s.nodes) + 1)
	nd := &simNode{id: id, dir: filepath.Join(s.t.TempDir(), strconv.Itoa(int(id))), fs: crashfs.New(seglog.OSFS()), join: true}
	s.nodes = append(s.nodes, nd)
	s.start(nd)
	return nd
}

// changeConf proposes cc on the leader until one proposal of it is
// applied there, running faulty steps meanwhile. A try whose outcome is
// unknown (leader killed or changed) is retried: adding a voter twice or
// removing a node twice changes nothing. It returns the index applied.
func (s *sim) changeConf(cc *pb.ConfChangeV2, maxSteps int) uint64 {
	var p *Proposal
	var by *simNode
	for i := 0; i < maxSteps; i++ {
		if p == nil {
			if by = s.leader(); by != nil {
				q, err := by.r.proposeConfChange(cc)
				if err == nil {
					p = q
					s.process(by)
				}
			}
		}
		if p != nil {
			select {
			case <-p.Done:
				if p.Err == nil {
					return p.Index
				}
				if !errors.Is(p.Err, ErrConfChangeRefused) && !errors.Is(p.Err, ErrLeaderChanged) && !errors.Is(p.Err, ErrClosed) {
					s.t.Fatalf("conf change %v: %v", cc, p.Err)
				}
				p = nil
			default:
			}
		}
		s.step(true)
		s.check(i)
	}
	s.t.Fatalf("conf change %v not applied in %d steps", cc, maxSteps)
	return 0
}

func confChange(t pb.ConfChangeType, id uint64) *pb.ConfChangeV2 {
	return &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: &t, NodeId: &id}}}
}

// TestSimMembership runs a 3-node group under faults, adds a 4th node by
// a conf change (it joins from an empty directory and catches up by
// snapshot), then removes the leader by another, all while nodes are
// killed and restarted; at the end every remaining member has every
// acknowledged entry and the same voters, and the removed node is not
// among them. Odd seeds use durable state machines, so a restart also
// replays conf changes below the state machine's applied index.
func TestSimMembership(t *testing.T) {
	for seed := 0; seed < simSeeds(2); seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			s := newSimWith(t, 3, uint64(200+seed), simOpts{durable: seed%2 == 1})
			defer s.closeAll()
			for i := 0; i < 1000; i++ {
				s.step(true)
				s.check(i)
			}
			nd4 := s.addNode()
			s.changeConf(confChange(pb.ConfChangeType_ConfChangeAddNode, nd4.id), 20000)
			for i := 0; i < 1500; i++ {
				s.step(true)
				s.check(i)
			}
			var victim *simNode
			clear(s.net.side) // a partition left by the faults could keep every side below quorum
			for i := 0; victim == nil && i < 20000; i++ {
				victim = s.leader()
				s.step(false)
			}
			if victim == nil {
				t.Fatal("no leader to remove")
			}
			s.changeConf(confChange(pb.ConfChangeType_ConfChangeRemoveNode, victim.id), 20000)
			victim.removed = true
			if victim.r != nil {
				victim.r.close(true)
				victim.r = nil
			}
			for i := 0; i < 1500; i++ {
				s.step(true)
				s.check(i)
			}
			s.settle(30000)
			var want []uint64
			for _, nd := range s.members() {
				want = append(want, nd.id)
			}
			for _, nd := range s.members() {
				got := slices.Sorted(slices.Values(nd.r.cs.GetVoters()))
				if !slices.Equal(got, want) {
					t.Fatalf("node %d has voters %v, want %v", nd.id, got, want)
				}
			}
			// Node 4 caught up: it was elected and removed, or it is a member
			// that restored the leader's snapshot.
			if victim != nd4 && (nd4.r.applied == 0 || nd4.sm.restores == 0) {
				t.Fatalf("node 4 applied %d with %d snapshots restored", nd4.r.applied, nd4.sm.restores)
			}
			t.Logf("removed %d; %d acked of %d proposed", victim.id, len(s.hist.acked), s.nextP)
		})
	}
}

// TestConfChangeRefusedWhilePending: raft refuses a conf change proposed
// while another is not applied (appending an empty entry instead); the
// proposal ends with ErrConfChangeRefused rather than waiting forever,
// whether it was proposed after the first was appended or alongside it,
// and the first one is applied.
func TestConfChangeRefusedWhilePending(t *testing.T) {
	for _, together := range []bool{false, true} {
		t.Run(fmt.Sprintf("together=%v", together), func(t *testing.T) {
			s := newSimWith(t, 3, 5, simOpts{})
			defer s.closeAll()
			var l *simNode
			for i := 0; i < 20000; i++ {
				s.step(false)
				// A leader that applied its term's first entry: until then it
				// refuses every conf change.
				if l = s.leader(); l != nil && l.r.applied >= l.r.rn.BasicStatus().HardState.GetCommit() && l.r.applied > 1 {
					break
				}
			}
			if l == nil {
				t.Fatal("no leader")
			}
			first, err := l.r.proposeConfChange(confChange(pb.ConfChangeType_ConfChangeAddLearnerNode, 7))
			if err != nil {
				t.Fatal(err)
			}
			if !together {
				s.process(l)
			}
			second, err := l.r.proposeConfChange(confChange(pb.ConfChangeType_ConfChangeAddLearnerNode, 8))
			if err != nil {
				t.Fatal(err)
			}
			s.process(l)
			select {
			case <-second.Done:
				if !errors.Is(second.Err, ErrConfChangeRefused) {
					t.Fatalf("second conf change ended with %v", second.Err)
				}
			default:
				t.Fatal("second conf change still pending after raft refused it")
			}
			for i := 0; i < 20000; i++ {
				select {
				case <-first.Done:
					if first.Err != nil {
						t.Fatalf("first conf change: %v", first.Err)
					}
					if !slices.Contains(l.r.cs.GetLearners(), 7) {
						t.Fatalf("learners %v after adding 7", l.r.cs.GetLearners())
					}
					return
				default:
				}
				s.step(false)
			}
			t.Fatal("first conf change never applied")
		})
	}
}

// TestRestartReplaysConfChangesBelowApplied: a node whose durable state
// machine is past a conf change that no snapshot covers still has that
// change in its raft configuration after a restart (raft replays it even
// though the state machine is not handed the entries again).
func TestRestartReplaysConfChangesBelowApplied(t *testing.T) {
	s := newSimWith(t, 3, 9, simOpts{durable: true, snapshotEvery: 1 << 30, syncEvery: 1})
	defer s.closeAll()
	s.changeConf(confChange(pb.ConfChangeType_ConfChangeAddLearnerNode, 7), 20000)
	for i := 0; i < 20000 && len(s.hist.acked) < 5; i++ {
		s.step(false)
		s.check(i)
	}
	s.settle(20000)
	var nd *simNode
	for _, n := range s.up() {
		if n != s.leader() {
			nd = n
		}
	}
	applied := nd.r.applied
	s.kill(nd)
	s.start(nd)
	if nd.dsm.resumedAt != applied || nd.r.ap.snapIndex != 1 {
		t.Fatalf("resumed at %d with snapshot %d, want %d with the bootstrap snapshot", nd.dsm.resumedAt, nd.r.ap.snapIndex, applied)
	}
	for i := 0; i < 20000 && nd.r.applied < applied; i++ {
		s.step(false)
		s.check(i)
	}
	_, inRaft := nd.r.rn.Status().Config.Learners[7]
	if !inRaft || !slices.Contains(nd.r.cs.GetLearners(), 7) {
		t.Fatalf("after the restart node %d has learners %v (in raft's config: %v), want 7", nd.id, nd.r.cs.GetLearners(), inRaft)
	}
}

// TestProposeBusyOverMaxUncommitted: a leader cut off from its quorum
// takes proposals only up to MaxUncommittedBytes of uncommitted entries,
// then refuses them with ErrBusy (nothing appended), not ErrNotLeader.
func TestProposeBusyOverMaxUncommitted(t *testing.T) {
	s := newSimWith(t, 3, 3, simOpts{maxUncommitted: 1000})
	defer s.closeAll()
	var l *simNode
	for i := 0; i < 20000 && l == nil; i++ {
		s.step(false)
		l = s.leader()
	}
	if l == nil {
		t.Fatal("no leader")
	}
	for _, nd := range s.nodes {
		s.net.side[nd.id] = 1
	}
	s.net.side[l.id] = 0
	data := make([]byte, 600)
	if _, err := l.r.propose(data); err != nil {
		t.Fatalf("first proposal: %v", err)
	}
	s.process(l)
	if _, err := l.r.propose(data); !errors.Is(err, ErrBusy) {
		t.Fatalf("second proposal over the limit: %v, want ErrBusy", err)
	}
}
