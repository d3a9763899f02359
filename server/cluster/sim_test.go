package cluster

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/fibrilmq/fibril/internal/crashfs"
	"github.com/fibrilmq/fibril/server/seglog"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// simNet is the in-process transport of the deterministic tests: every
// message sent waits in one queue, and the test picks which to deliver
// next, so delay and reorder come from the seed; Send drops or duplicates
// some, and a partition drops messages across its cut.
type simNet struct {
	rng      *rand.Rand
	queue    []*pb.Message
	side     map[uint64]int // partition side of each node; all 0 when healed
	drop     int            // per mille
	dup      int            // per mille
	sent     int
	lossless bool
}

type simLink struct{ net *simNet }

func (simLink) ReportsSnapshots() bool { return false }

func (l simLink) Send(msgs []*pb.Message) {
	n := l.net
	for _, m := range msgs {
		n.sent++
		if !n.lossless && n.rng.IntN(1000) < n.drop {
			continue
		}
		n.queue = append(n.queue, m)
		if !n.lossless && n.rng.IntN(1000) < n.dup {
			n.queue = append(n.queue, m)
		}
	}
}

// pop removes a random queued message (reordering and delaying others).
func (n *simNet) pop() *pb.Message {
	if len(n.queue) == 0 {
		return nil
	}
	i := n.rng.IntN(len(n.queue))
	if n.rng.IntN(2) == 0 {
		i = 0 // mostly in order, so progress is steady
	}
	m := n.queue[i]
	n.queue = append(n.queue[:i], n.queue[i+1:]...)
	if n.side[m.GetFrom()] != n.side[m.GetTo()] {
		return nil
	}
	return m
}

type simNode struct {
	id      uint64
	dir     string
	fs      *crashfs.FS
	r       *replica // nil while down
	sm      *testSM
	dsm     *durableSM // with simOpts.durable: sm's durable form
	join    bool       // added by a conf change: never bootstrapped
	removed bool       // removed by a conf change: down for good
}

// sim runs a group of replicas on one goroutine, each step chosen by rng.
type sim struct {
	t       *testing.T
	rng     *rand.Rand
	net     *simNet
	nodes   []*simNode
	peers   []uint64
	hist    *history
	pending map[string]*Proposal
	reads   []simRead
	served  int // reads that completed and were checked
	nextP   int
	opts    simOpts
	resumed int // restarts where the state machine resumed past the snapshot
}

// simOpts are a sim's variations.
type simOpts struct {
	early   bool // Config.ackOnLocalAppend: a broken build for the checker's test
	durable bool // durableSM state machines, which survive a restart
	// snapshotEvery is Config.SnapshotEvery (0: 20), syncEvery the
	// durableSM's (0: drawn from the seed, 1 to 8).
	snapshotEvery uint64
	syncEvery     int
	// maxUncommitted is Config.MaxUncommittedBytes (0: its default).
	maxUncommitted uint64
}

func newSim(t *testing.T, n int, seed uint64, early bool) *sim {
	return newSimWith(t, n, seed, simOpts{early: early})
}

func newSimWith(t *testing.T, n int, seed uint64, opts simOpts) *sim {
	rng := rand.New(rand.NewPCG(seed, 7))
	s := &sim{t: t, rng: rng, net: &simNet{rng: rng, side: map[uint64]int{}, drop: 50, dup: 50},
		hist: newHistory(), pending: map[string]*Proposal{}, opts: opts}
	base := t.TempDir()
	for i := 1; i <= n; i++ {
		s.peers = append(s.peers, uint64(i))
	}
	for _, id := range s.peers {
		nd := &simNode{id: id, dir: filepath.Join(base, strconv.Itoa(int(id))), fs: crashfs.New(seglog.OSFS())}
		s.nodes = append(s.nodes, nd)
		s.start(nd)
	}
	return s
}

func (s *sim) start(nd *simNode) {
	var sm StateMachine
	nd.sm = newTestSM()
	sm = nd.sm
	if s.opts.durable {
		every := s.opts.syncEvery
		if every == 0 {
			every = 1 + s.rng.IntN(8)
		}
		d, err := openDurableSM(filepath.Join(nd.dir, "sm"), nd.fs, every)
		if err != nil {
			s.t.Fatalf("start node %d: %v", nd.id, err)
		}
		nd.dsm, nd.sm, sm = d, d.testSM, d
	}
	snapEvery := s.opts.snapshotEvery
	if snapEvery == 0 {
		snapEvery = 20
	}
	r, err := newReplica(Config{ID: nd.id, Peers: s.peers, Dir: nd.dir, FS: nd.fs, SnapshotEvery: snapEvery, Join: nd.join, MaxUncommittedBytes: s.opts.maxUncommitted,
		ackOnLocalAppend: s.opts.early, manualElections: true}, sm, simLink{s.net})
	if err != nil {
		s.t.Fatalf("start node %d: %v", nd.id, err)
	}
	if nd.dsm != nil && nd.dsm.resumedAt > r.ap.snapIndex {
		s.resumed++
	}
	nd.r = r
}

// kill crashes a node: unsynced writes are cut at a random byte.
func (s *sim) kill(nd *simNode) {
	nd.r.close(false)
	nd.r = nil
	if nd.dsm != nil {
		nd.dsm.log.Abandon()
		nd.dsm = nil
	}
	if _, err := nd.fs.Crash(s.rng, crashfs.CrashCut); err != nil {
		s.t.Fatal(err)
	}
}

// members returns the nodes not removed.
func (s *sim) members() []*simNode {
	var out []*simNode
	for _, nd := range s.nodes {
		if !nd.removed {
			out = append(out, nd)
		}
	}
	return out
}

func (s *sim) up() []*simNode {
	var out []*simNode
	for _, nd := range s.nodes {
		if nd.r != nil && !nd.removed {
			out = append(out, nd)
		}
	}
	return out
}

func (s *sim) node(id uint64) *simNode {
	if id == 0 || id > uint64(len(s.nodes)) {
		return nil
	}
	return s.nodes[id-1]
}

func (s *sim) process(nd *simNode) {
	if err := nd.r.process(); err != nil {
		s.t.Fatalf("node %d: %v", nd.id, err)
	}
}

// work runs nd's local jobs as its workers would, at a time the seed
// picks: three times in four a prefix of its append jobs (of a length
// the seed picks), and likewise of its apply jobs, then processes what
// they fed back. Until it runs them a node's writes are in flight (a
// kill loses them) and its entries unapplied.
func (s *sim) work(nd *simNode) {
	r := nd.r
	if n := len(r.appendq); n > 0 && s.rng.IntN(4) != 0 {
		k := 1 + s.rng.IntN(n)
		batch := r.appendq[:k:k]
		r.appendq = r.appendq[k:]
		err := r.persist(batch) // one batch, one fsync, as the worker does
		for _, m := range batch {
			if err := r.appendDone(m, err); err != nil {
				s.t.Fatalf("node %d: append: %v", nd.id, err)
			}
		}
	}
	if n := len(r.applyq); n > 0 && s.rng.IntN(4) != 0 {
		for k := 1 + s.rng.IntN(n); k > 0; k-- {
			j := r.applyq[0]
			r.applyq = r.applyq[1:]
			j.err = r.ap.run(j)
			if err := r.applyDone(j); err != nil {
				s.t.Fatalf("node %d: apply: %v", nd.id, err)
			}
		}
	}
	s.process(nd)
}

// drain runs every local job nd holds, and those they lead to.
func (s *sim) drain(nd *simNode) {
	for len(nd.r.appendq)+len(nd.r.applyq) > 0 {
		s.work(nd)
	}
}

func (s *sim) campaign(nd *simNode) {
	if err := nd.r.rn.Campaign(); err != nil {
		s.t.Fatalf("node %d campaign: %v", nd.id, err)
	}
	s.process(nd)
}

func (s *sim) leader() *simNode { return s.leaderExcept(nil) }

func (s *sim) leaderExcept(not *simNode) *simNode {
	for _, nd := range s.up() {
		if nd != not && nd.r.rn.BasicStatus().RaftState == raft.StateLeader {
			return nd
		}
	}
	return nil
}

func (s *sim) propose(nd *simNode) {
	data := fmt.Sprintf("p%d", s.nextP)
	s.nextP++
	p, err := nd.r.propose([]byte(data))
	if err == nil {
		s.pending[data] = p
		s.process(nd)
	}
}

// collect moves completed proposals into the history.
func (s *sim) collect() {
	for data, p := range s.pending {
		select {
		case <-p.Done:
			if p.Err == nil {
				s.hist.acked[data] = p.Index
			}
			delete(s.pending, data)
		default:
		}
	}
	keep := s.reads[:0]
	for _, rd := range s.reads {
		select {
		case <-rd.p.Done:
			if rd.p.Err == nil {
				s.checkRead(rd)
			}
		default:
			keep = append(keep, rd)
		}
	}
	s.reads = keep
}

// simRead is a read index in flight: what was acknowledged when it
// started, which the replica must hold when it completes.
type simRead struct {
	p    *Proposal
	nd   *simNode
	r    *replica
	need map[string]uint64
}

// read starts a read index on nd.
func (s *sim) read(nd *simNode) {
	p := nd.r.readIndex()
	s.reads = append(s.reads, simRead{p: p, nd: nd, r: nd.r, need: maps.Clone(s.hist.acked)})
	s.process(nd)
}

// checkRead fails a read that completed without every entry acknowledged
// before it began: a stale read, as a deposed leader would serve.
func (s *sim) checkRead(rd simRead) {
	s.served++
	for data, i := range rd.need {
		if rd.r.applied < i || rd.nd.sm.byIndex[i] != data {
			s.t.Fatalf("node %d served a read at %d (applied %d) without %q acknowledged at %d before it", rd.nd.id, rd.p.Index, rd.r.applied, data, i)
		}
	}
}

func (s *sim) check(step int) {
	s.collect()
	sms := map[uint64]*testSM{}
	for _, nd := range s.up() {
		nd.sm.applied = nd.r.applied
		sms[nd.id] = nd.sm
	}
	if err := s.hist.check(sms); err != nil {
		s.t.Fatalf("step %d: %v", step, err)
	}
}

// step does one random thing: deliver, tick, propose, kill, restart,
// partition or heal.
func (s *sim) step(faults bool) {
	up := s.up()
	switch a := s.rng.IntN(100); {
	case a < 5:
		s.work(up[s.rng.IntN(len(up))])
	case a < 60:
		m := s.net.pop()
		if nd := s.node(m.GetTo()); m != nil && nd != nil && nd.r != nil {
			_ = nd.r.rn.Step(m)
			s.process(nd)
			s.work(nd) // its workers mostly keep up with it
		}
	case a < 78:
		nd := up[s.rng.IntN(len(up))]
		nd.r.rn.Tick()
		s.process(nd)
		if s.rng.IntN(2) == 0 {
			s.work(nd)
		}
	case a < 80:
		// Elections are the seed's to call (see Config.manualElections):
		// often when no leader is up, rarely otherwise. An election takes
		// several steps (each vote is persisted before it is sent), so
		// campaigns when none leads are spaced to let one finish.
		if s.leader() == nil && s.rng.IntN(4) == 0 || s.rng.IntN(20) == 0 {
			s.campaign(up[s.rng.IntN(len(up))])
		}
	case a < 90:
		if nd := s.leader(); nd != nil {
			s.propose(nd)
		}
	case a < 92:
		s.read(up[s.rng.IntN(len(up))])
	case !faults:
	case a < 94:
		if down := len(s.members()) - len(up); down < (len(s.members())-1)/2 {
			victim := up[s.rng.IntN(len(up))]
			if l := s.leader(); l != nil && s.rng.IntN(2) == 0 {
				victim = l // leader kills half the time
			}
			s.kill(victim)
		}
	case a < 97:
		for _, nd := range s.members() {
			if nd.r == nil {
				s.start(nd)
				break
			}
		}
	case a < 98:
		for _, nd := range s.nodes {
			s.net.side[nd.id] = s.rng.IntN(2)
		}
	default:
		clear(s.net.side)
	}
}

// settle heals everything, restarts every node and runs without faults
// until every node has applied everything acknowledged.
func (s *sim) settle(maxSteps int) {
	clear(s.net.side)
	s.net.lossless = true
	for _, nd := range s.members() {
		if nd.r == nil {
			s.start(nd)
		}
	}
	var top uint64
	for i := 0; i < maxSteps; i++ {
		s.step(false)
		s.check(i)
		if i%200 == 199 && s.leader() != nil {
			s.propose(s.leader()) // a new entry lets every follower catch up
		}
		top = 0
		for _, i := range s.hist.acked {
			top = max(top, i)
		}
		done := true
		for _, nd := range s.members() {
			done = done && nd.r.applied >= top
		}
		if done && i > 0 {
			return
		}
	}
	s.t.Fatalf("did not settle in %d steps (highest ack %d)", maxSteps, top)
}

func (s *sim) closeAll() {
	for _, nd := range s.nodes {
		if nd.r == nil {
			continue
		}
		nd.r.close(true)
		nd.r = nil
		if nd.dsm != nil {
			nd.dsm.log.Close()
			nd.dsm = nil
		}
	}
}

func simSeeds(def int) int {
	if v, err := strconv.Atoi(os.Getenv("FIBRIL_RAFT_SEEDS")); err == nil && v > 0 {
		return v
	}
	return def
}

// TestSimFaults runs 3- and 5-node groups under random drops, duplicates,
// reordering, partitions and crash-restarts (leaders half the time),
// checking the invariants and every completed read after every step and,
// at the end, that every acknowledged proposal reached every node. FIBRIL_RAFT_SEEDS=N runs N
// seeds per size.
func TestSimFaults(t *testing.T) {
	seeds := simSeeds(3)
	served := 0
	for _, n := range []int{3, 5} {
		for seed := 0; seed < seeds; seed++ {
			t.Run(fmt.Sprintf("n%d/seed%d", n, seed), func(t *testing.T) {
				s := newSim(t, n, uint64(seed), false)
				defer s.closeAll()
				for i := 0; i < 3000; i++ {
					s.step(true)
					s.check(i)
				}
				// A run the faults left with few acknowledgements goes on
				// without faults, so that its checks prove something.
				for i := 0; i < 20000 && len(s.hist.acked) < 3; i++ {
					s.step(false)
					s.check(i)
				}
				s.settle(20000)
				if len(s.hist.acked) < 3 {
					t.Fatalf("only %d proposals acknowledged", len(s.hist.acked))
				}
				served += s.served
				t.Logf("%d acked of %d proposed, %d reads served, %d messages", len(s.hist.acked), s.nextP, s.served, s.net.sent)
			})
		}
	}
	if served == 0 {
		t.Fatal("no read served in any run: the read check proved nothing")
	}
}

// TestSimDurableRestart runs TestSimFaults' faults with state machines
// that keep their state on disk (durableSM, fsynced every few applies),
// so a node killed and restarted resumes from its state machine's applied
// index rather than from the snapshot: the checker fails an entry applied
// twice, skipped, or a restore that takes the state back. The run must
// have resumed past a snapshot at least once, or it proved nothing.
func TestSimDurableRestart(t *testing.T) {
	seeds := simSeeds(2)
	for _, n := range []int{3, 5} {
		for seed := 0; seed < seeds; seed++ {
			t.Run(fmt.Sprintf("n%d/seed%d", n, seed), func(t *testing.T) {
				s := newSimWith(t, n, uint64(100+seed), simOpts{durable: true})
				defer s.closeAll()
				for i := 0; i < 3000; i++ {
					s.step(true)
					s.check(i)
				}
				s.settle(20000)
				if s.resumed == 0 {
					t.Fatalf("no restart resumed from a durable applied index")
				}
				t.Logf("%d acked of %d proposed, %d resumed", len(s.hist.acked), s.nextP, s.resumed)
			})
		}
	}
}

// TestCheckerCatchesEarlyAck shows the checker failing a build that
// acknowledges a proposal once the leader fsynced it, before a quorum
// holds it: the leader is cut off, acknowledges a proposal, the others
// elect a new leader and commit other entries at that index.
func TestCheckerCatchesEarlyAck(t *testing.T) {
	s := newSimWith(t, 3, 1, simOpts{early: true})
	defer s.closeAll()
	var old *simNode
	for i := 0; i < 5000 && old == nil; i++ {
		s.step(false)
		old = s.leader()
	}
	if old == nil {
		t.Fatal("no leader")
	}
	for _, nd := range s.nodes {
		s.net.side[nd.id] = 1
	}
	s.net.side[old.id] = 0
	s.propose(old)
	s.drain(old)
	s.collect()
	if len(s.hist.acked) != 1 {
		t.Fatalf("the broken build did not acknowledge early: %v", s.hist.acked)
	}
	// Only deliveries and ticks from here: the majority elects a leader of
	// its own and commits entries there, then the partition heals.
	quiet := func() {
		if s.rng.IntN(3) == 0 {
			s.work(s.nodes[s.rng.IntN(len(s.nodes))])
			return
		}
		if s.rng.IntN(2) == 0 {
			if m := s.net.pop(); m != nil {
				nd := s.node(m.GetTo())
				_ = nd.r.rn.Step(m)
				s.process(nd)
			}
			return
		}
		nd := s.nodes[s.rng.IntN(len(s.nodes))]
		if nd != old && s.leaderExcept(old) == nil && s.rng.IntN(50) == 0 {
			s.campaign(nd)
			return
		}
		nd.r.rn.Tick()
		s.process(nd)
	}
	for i := 0; i < 20000 && len(s.hist.acked) < 4; i++ {
		quiet()
		if l := s.leaderExcept(old); l != nil && i%20 == 0 {
			s.propose(l)
		}
		s.collect()
	}
	clear(s.net.side)
	for i := 0; i < 20000; i++ {
		quiet()
		s.collect()
		sms := map[uint64]*testSM{}
		for _, nd := range s.up() {
			nd.sm.applied = nd.r.applied
			sms[nd.id] = nd.sm
		}
		if err := s.hist.check(sms); err != nil {
			t.Logf("caught: %v", err)
			return
		}
	}
	for _, nd := range s.nodes {
		t.Logf("node %d applied %d", nd.id, nd.r.applied)
	}
	t.Fatalf("the checker did not catch a proposal acknowledged before commit (%d acked)", len(s.hist.acked))
}

// TestSimReplays runs one seed twice: the same seed must give the same
// run (messages sent, proposals made and acknowledged at the same
// indexes), so a failing seed can be replayed.
func TestSimReplays(t *testing.T) {
	run := func() string {
		s := newSim(t, 3, 11, false)
		defer s.closeAll()
		for i := 0; i < 1500; i++ {
			s.step(true)
			s.check(i)
		}
		return fmt.Sprint(s.net.sent, s.nextP, s.hist.acked)
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("seed 11 ran differently twice:\n%s\n%s", a, b)
	}
}
