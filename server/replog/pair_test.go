package replog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/cluster"
	"github.com/fibrilmq/fibril/server/seglog"
	pb "go.etcd.io/raft/v3/raftpb"
)

func testGroupCfg(id uint64, peers []uint64) cluster.Config {
	// Election timeouts of 100 ms: no spurious election under a loaded
	// -race run (the tests that move leadership stop a group instead).
	return cluster.Config{ID: id, Peers: peers, ElectionTicks: 50, HeartbeatTicks: 1}
}

// Net is an in-process transport: messages go straight to the target
// group's Step. Tests of other packages use it too (NewNet).
type Net struct {
	mu     sync.Mutex
	groups map[uint64]*cluster.Group
	// wrap, if set, stands between a fetch server and its stream (to
	// damage or hold it).
	wrap func(w io.Writer) io.Writer
}

// fetcher is replica from's cluster.Config.Fetch over n: the replica
// asked answers into a pipe, cut when ctx ends (as a link's deadline
// would).
func (n *Net) fetcher(from uint64) func(ctx context.Context, to uint64, req []byte) (io.ReadCloser, error) {
	return func(ctx context.Context, to uint64, req []byte) (io.ReadCloser, error) {
		n.mu.Lock()
		g, wrap := n.groups[to], n.wrap
		n.mu.Unlock()
		if g == nil {
			return nil, fmt.Errorf("replica %d unreachable", to)
		}
		pr, pw := io.Pipe()
		var w io.Writer = pw
		if wrap != nil {
			w = wrap(pw)
		}
		go func() { pw.CloseWithError(g.AnswerFetch(from, bytes.Clone(req), w)) }()
		go func() {
			<-ctx.Done()
			pr.CloseWithError(ctx.Err())
		}()
		return pr, nil
	}
}

func (*Net) ReportsSnapshots() bool { return false }

func (n *Net) Send(msgs []*pb.Message) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range msgs {
		if g := n.groups[m.GetTo()]; g != nil {
			g.Step(m)
		}
	}
}

func (n *Net) set(id uint64, g *cluster.Group) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if g == nil {
		delete(n.groups, id)
		return
	}
	n.groups[id] = g
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// gateFS is the operating system's file system whose fsyncs wait while
// the gate is shut.
type gateFS struct {
	seglog.FS
	mu   sync.Mutex
	gate chan struct{}
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
		<-gate
	}
	return f.File.Sync()
}

// trio is three Pairs of one partition, each in its own directory.
type trio struct {
	t     *testing.T
	base  string
	net   *Net
	pairs map[uint64]*Pair
	fss   map[uint64]*gateFS // each replica's raft log file system
	cfg   Config
	// nodes, when set, runs each replica's group on a cluster.Node (over
	// real TCP and mutual TLS), by its raft ID.
	nodes map[uint64]*cluster.Node
	names []string // the nodes' names
}

func newTrio(t *testing.T, cfg Config) *trio {
	tr := &trio{t: t, base: t.TempDir(), net: &Net{groups: map[uint64]*cluster.Group{}}, pairs: map[uint64]*Pair{}, fss: map[uint64]*gateFS{}, cfg: cfg}
	for id := uint64(1); id <= 3; id++ {
		tr.open(id)
	}
	t.Cleanup(func() {
		for _, fs := range tr.fss {
			fs.open()
		}
		for _, p := range tr.pairs {
			p.Data().Close()
			p.Events().Close()
		}
	})
	return tr
}

func (tr *trio) open(id uint64) *Pair {
	cfg := tr.cfg
	every := cfg.Group.SnapshotEvery
	peers := []uint64{1, 2, 3}
	if tr.nodes != nil {
		peers = nil
		for nid := range tr.nodes {
			peers = append(peers, nid)
		}
	}
	cfg.Group = testGroupCfg(id, peers)
	cfg.Group.SnapshotEvery = every
	cfg.Transport, cfg.Tick = tr.net, 2*time.Millisecond
	cfg.Group.Fetch = tr.net.fetcher(id)
	if n := tr.nodes[id]; n != nil {
		members := tr.names
		cfg.OpenGroup = func(gc cluster.Config, sm cluster.StateMachine) (*cluster.Group, error) {
			// As a broker's node opens a partition: the node's own
			// link, ID and members.
			return n.AddGroupWith(nodeGroup, members, sm, func(c *cluster.Config) {
				c.Dir, c.OnLeader, c.CompactBehindMatch = gc.Dir, gc.OnLeader, gc.CompactBehindMatch
				c.SnapshotEvery, c.MaxEntryBytes = gc.SnapshotEvery, gc.MaxEntryBytes
			})
		}
		cfg.CloseGroup = func(*cluster.Group) error { return n.CloseGroup(nodeGroup) }
		cfg.Group.Fetch = nil
	}
	if tr.fss[id] == nil {
		tr.fss[id] = &gateFS{FS: seglog.OSFS()}
	}
	cfg.Group.FS = tr.fss[id]
	p, err := Open(filepath.Join(tr.base, strconv.Itoa(int(id))), cfg)
	if err != nil {
		tr.t.Fatal(err)
	}
	if tr.nodes == nil {
		tr.net.set(id, p.Group())
	}
	tr.pairs[id] = p
	return p
}

// stop closes a replica's logs (and group) and unlinks it.
func (tr *trio) stop(id uint64) {
	p := tr.pairs[id]
	tr.net.set(id, nil)
	if err := errors.Join(p.Data().Close(), p.Events().Close()); err != nil {
		tr.t.Fatalf("close %d: %v", id, err)
	}
	delete(tr.pairs, id)
}

// leader waits for a serving replica.
func (tr *trio) leader() uint64 {
	var lead uint64
	waitFor(tr.t, "a serving leader", func() bool {
		for id, p := range tr.pairs {
			if ok, _ := p.Serving(); ok {
				lead = id
				return true
			}
		}
		return false
	})
	return lead
}

func (tr *trio) follower(lead uint64) uint64 {
	for id := range tr.pairs {
		if id != lead {
			return id
		}
	}
	tr.t.Fatal("no follower")
	return 0
}

// TestPairReplicates: batches appended on the leader get consecutive
// seqs at once, are readable there before and after Sync, and every
// replica's logs end up holding the same records at the same seqs; the
// leader's replicated state file reaches every replica.
func TestPairReplicates(t *testing.T) {
	tr := newTrio(t, Config{})
	lead := tr.leader()
	p := tr.pairs[lead]
	var want []string
	for b := 0; b < 20; b++ {
		es := recs(5, fmt.Sprintf("b%d-", b))
		first, err := p.Data().Append(es)
		if err != nil {
			t.Fatal(err)
		}
		if first != seglog.Seq(b*5+1) {
			t.Fatalf("batch %d got seq %d, want %d", b, first, b*5+1)
		}
		r, err := p.Data().Read(first + 4) // pending or applied: readable either way
		if err != nil || string(r.Data) != fmt.Sprintf("b%d-4", b) {
			t.Fatalf("read %d: %q %v", first+4, r.Data, err)
		}
		for _, e := range es {
			want = append(want, string(e.Data))
		}
		if _, err := p.Events().Append(recs(1, "ev")); err != nil {
			t.Fatal(err)
		}
	}
	upto, err := p.Data().Sync()
	if err != nil || upto != 100 {
		t.Fatalf("sync: %d %v, want 100", upto, err)
	}
	if err := p.WriteState("state.snap", []byte("S1")); err != nil {
		t.Fatal(err)
	}
	for id, q := range tr.pairs {
		waitFor(t, "replica to apply", func() bool { return q.Data().Durable() == 100 && q.Events().Durable() == 20 })
		if got := readAll(t, q.data.loc()); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("replica %d holds %v", id, got)
		}
		waitFor(t, "the state file", func() bool {
			b, _ := os.ReadFile(filepath.Join(q.dir, "state.snap"))
			return string(b) == "S1"
		})
	}
	var scanned []string
	if err := p.Data().Scan(96, 0, func(r seglog.Record) bool { scanned = append(scanned, string(r.Data)); return true }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(scanned) != fmt.Sprint(want[95:]) {
		t.Fatalf("scan from 96: %v", scanned)
	}
}

// TestPairFollowerRefuses: a follower appends, syncs, truncates and
// writes state nothing: ErrNotLeader each time.
func TestPairFollowerRefuses(t *testing.T) {
	tr := newTrio(t, Config{})
	f := tr.pairs[tr.follower(tr.leader())]
	if _, err := f.Data().Append(recs(1, "x")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append: %v", err)
	}
	if _, err := f.Events().Sync(); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("sync: %v", err)
	}
	if err := f.Data().TruncateFront(1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("truncate: %v", err)
	}
	if err := f.WriteState("state.snap", nil); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("write state: %v", err)
	}
}

// TestPairPendingBound: while the leader cannot apply (its raft log's
// fsync hangs) appends stay pending and readable from the buffer; past
// MaxPendingBytes Append fails with ErrBusy, taking no seq; once they
// apply it takes more.
func TestPairPendingBound(t *testing.T) {
	tr := newTrio(t, Config{MaxPendingBytes: 100})
	lead := tr.leader()
	p := tr.pairs[lead]
	tr.fss[lead].shut()
	big := []seglog.Entry{{Data: []byte("0123456789012345678901234567890123456789")}}
	for i := 0; i < 2; i++ {
		if _, err := p.Data().Append(big); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if r, err := p.Data().Read(2); err != nil || string(r.Data) != string(big[0].Data) {
		t.Fatalf("pending record 2: %q %v", r.Data, err)
	}
	if _, err := p.Data().Append(big); !errors.Is(err, ErrBusy) {
		t.Fatalf("past the bound: %v, want ErrBusy", err)
	}
	if _, last := p.Data().Bounds(); last != 2 {
		t.Fatalf("last %d after the refused append, want 2", last)
	}
	tr.fss[lead].open()
	if upto, err := p.Data().Sync(); err != nil || upto != 2 {
		t.Fatalf("sync: %d %v, want 2", upto, err)
	}
	if first, err := p.Data().Append(big); err != nil || first != 3 {
		t.Fatalf("after the pending ones applied: %d %v", first, err)
	}
}

// TestPairLeaderLoss: the leader's group stops with entries appended;
// its Sync fails with ErrNotLeader; a new leader serves only once it
// applied everything committed, and continues at the next seq with no
// gap; the old leader reopens from its directory and catches up to the
// same records.
func TestPairLeaderLoss(t *testing.T) {
	// Snapshots every 5 entries: the old leader still catches up from
	// the log (the new leader compacts only behind its match index).
	tr := newTrio(t, Config{Group: cluster.Config{SnapshotEvery: 5}})
	old := tr.leader()
	p := tr.pairs[old]
	for i := 0; i < 10; i++ {
		if _, err := p.Data().Append(recs(3, fmt.Sprintf("o%d-", i))); err != nil {
			t.Fatal(err)
		}
	}
	synced, err := p.Data().Sync()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Data().Append(recs(3, "late")); err != nil {
		t.Fatal(err)
	}
	if err := p.CloseGroup(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Data().Sync(); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("sync after the group stopped: %v", err)
	}
	tr.stop(old)
	lead := tr.leader()
	q := tr.pairs[lead]
	_, last := q.Data().Bounds()
	if last < synced {
		t.Fatalf("new leader holds data to %d, the old one had synced %d", last, synced)
	}
	first, err := q.Data().Append(recs(2, "new"))
	if err != nil {
		t.Fatal(err)
	}
	if first != last+1 {
		t.Fatalf("new leader appends at %d after %d", first, last)
	}
	for i := 0; i < 30; i++ { // entries past several snapshots
		if _, err := q.Data().Append(recs(1, fmt.Sprintf("more%d", i))); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Data().Sync(); err != nil {
			t.Fatal(err)
		}
	}
	end := q.Data().Durable()
	r := tr.open(old)
	waitFor(t, "the old leader to catch up", func() bool { return r.Data().Durable() == end })
	if got, want := readAll(t, r.data.loc()), readAll(t, q.data.loc()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("old leader holds %v, new leader %v", got, want)
	}
}

// TestPairLostEntryEndsEpoch: an entry of the serving epoch that the
// state machine skips (its first seq is not the next: a predecessor was
// lost) ends the epoch, and a new barrier starts the next one, whose
// appends continue right after what was applied (the skipped record is
// nowhere).
func TestPairLostEntryEndsEpoch(t *testing.T) {
	dir := t.TempDir()
	p, err := Open(dir, Config{Group: testGroupCfg(1, []uint64{1}), Transport: &Net{groups: map[uint64]*cluster.Group{}}, Tick: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.Data().Close()
		p.Events().Close()
	}()
	waitFor(t, "serving", func() bool { ok, _ := p.Serving(); return ok })
	if _, err := p.Data().Append(recs(3, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Data().Sync(); err != nil {
		t.Fatal(err)
	}
	_, epoch := p.Serving()
	// As if the entry for seqs 4-5 had been refused: one for 6 arrives.
	p.mu.Lock()
	err = p.proposeLocked(recEntry(tagData, epoch, 6, recs(1, "x")), true, nil)
	p.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	// The epoch ends (+1) and the next one serves (+1).
	waitFor(t, "the next serving epoch", func() bool { ok, e := p.Serving(); return ok && e >= epoch+2 })
	first, err := p.Data().Append(recs(1, "b"))
	if err != nil || first != 4 {
		t.Fatalf("append in the next epoch: %d %v, want 4", first, err)
	}
	if _, err := p.Data().Sync(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, p.data.loc()); fmt.Sprint(got) != "[a0 a1 a2 b0]" {
		t.Fatalf("data log %v", got)
	}
}

// TestPairScanAcrossPending: a Scan passes the applied records, then the
// pending ones, in order, with the byte budget counted over both (never
// a pending record after applied ones the budget left out).
func TestPairScanAcrossPending(t *testing.T) {
	tr := newTrio(t, Config{})
	lead := tr.leader()
	p := tr.pairs[lead]
	sized := func(tag string, size int) []seglog.Entry {
		es := make([]seglog.Entry, 3)
		for i := range es {
			es[i] = seglog.Entry{Data: []byte(fmt.Sprintf("%s%0*d", tag, size-1, i))}
		}
		return es
	}
	if _, err := p.Data().Append(sized("a", 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Data().Sync(); err != nil {
		t.Fatal(err)
	}
	tr.fss[lead].shut() // what follows stays pending
	defer tr.fss[lead].open()
	if _, err := p.Data().Append(sized("b", 2)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		from     seglog.Seq
		maxBytes int
		want     string
	}{
		{1, 0, "[a000000000 a000000001 a000000002 b0 b1 b2]"},
		{1, 15, "[a000000000]"}, // a1 does not fit: b0 (which would) must not follow a0
		{2, 22, "[a000000001 a000000002 b0]"},
		{3, 0, "[a000000002 b0 b1 b2]"},
		{5, 0, "[b1 b2]"},
		{5, 1, "[b1]"},
		{7, 0, "[]"},
	}
	for _, tc := range cases {
		got := []string{}
		if err := p.Data().Scan(tc.from, tc.maxBytes, func(r seglog.Record) bool { got = append(got, string(r.Data)); return true }); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != tc.want {
			t.Errorf("scan from %d, %d bytes: %v, want %s", tc.from, tc.maxBytes, got, tc.want)
		}
	}
}

// TestPairStoppedGroupNoBarrierRetry: when the group stops under a
// serving pair with entries pending (not through CloseGroup), the epoch
// ends and no barrier is retried on a timer forever: nothing would take
// it.
func TestPairStoppedGroupNoBarrierRetry(t *testing.T) {
	fs := &gateFS{FS: seglog.OSFS()}
	cfg := Config{Group: testGroupCfg(1, []uint64{1}), Transport: &Net{groups: map[uint64]*cluster.Group{}}, Tick: 2 * time.Millisecond}
	cfg.Group.FS = fs
	p, err := Open(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		fs.open()
		p.Data().Close()
		p.Events().Close()
	}()
	waitFor(t, "serving", func() bool { ok, _ := p.Serving(); return ok })
	fs.shut()
	if _, err := p.Data().Append(recs(1, "a")); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- p.Group().Close() }()
	waitFor(t, "the group's loop to stop", func() bool {
		_, err := p.Group().Status(context.Background())
		return errors.Is(err, cluster.ErrClosed)
	})
	fs.open() // the append worker ends; Close fails what was pending
	<-closed
	if ok, _ := p.Serving(); ok {
		t.Fatal("still serving after the group stopped with entries pending")
	}
	p.mu.Lock()
	retry := p.retry
	p.mu.Unlock()
	if retry != nil {
		t.Fatal("a barrier retry is armed on a stopped group")
	}
}
