package replog

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/cluster"
	"github.com/fibrilmq/fibril/server/seglog"
	pb "go.etcd.io/raft/v3/raftpb"
)

// lagBehindSnapshot stops replica lag of a trio, writes past several
// raft snapshots on the leader (with a state file and front truncations
// of both logs, in small segments), and moves the leadership to the
// other replica, whose raft log, compacted as a follower's, no longer
// holds what lag lacks. It returns the new leader.
func lagBehindSnapshot(t *testing.T, tr *trio) (lag, lead uint64) {
	t.Helper()
	old := tr.leader()
	lag = tr.follower(old)
	tr.stop(lag)
	p := tr.pairs[old]
	pad := make([]byte, 200)
	for i := 0; i < 60; i++ {
		es := []seglog.Entry{{Meta: []byte{byte(i)}, Data: append([]byte(fmt.Sprintf("d%03d-", i)), pad...)}}
		if _, err := p.Data().Append(es); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Events().Append(recs(2, fmt.Sprintf("e%d-", i))); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Data().Sync(); err != nil {
			t.Fatal(err)
		}
		if i == 40 {
			if err := p.WriteState("state.snap", []byte("S40")); err != nil {
				t.Fatal(err)
			}
			if err := p.Data().TruncateFront(30); err != nil {
				t.Fatal(err)
			}
			if err := p.Events().TruncateFront(60); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := p.Events().Sync(); err != nil {
		t.Fatal(err)
	}
	for id := range tr.pairs {
		if id != old {
			lead = id
		}
	}
	if err := p.Group().TransferLeadership(context.Background(), lead); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new leader to serve", func() bool { ok, _ := tr.pairs[lead].Serving(); return ok })
	q := tr.pairs[lead]
	for i := 0; i < 5; i++ {
		if _, err := q.Data().Append(recs(1, fmt.Sprintf("after%d-", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Data().Sync(); err != nil {
		t.Fatal(err)
	}
	if first, _ := q.data.loc().Bounds(); first == 1 {
		t.Fatalf("the leader's data log was not truncated (segments too large for the test)")
	}
	return lag, lead
}

// sameLogs waits until replica a has applied what b did, then checks
// that both hold the same records (every seq both hold, byte for
// byte, and the same last seq), the same applied position and the same
// state file.
func sameLogs(t *testing.T, a, b *Pair) {
	t.Helper()
	waitFor(t, "the replica to catch up", func() bool {
		return a.seen.Load() == b.seen.Load() && a.Data().Durable() == b.Data().Durable() && a.Events().Durable() == b.Events().Durable()
	})
	for _, x := range []struct {
		name string
		a, b *Log
	}{{"data", a.data, b.data}, {"events", a.events, b.events}} {
		af, al := x.a.loc().Bounds()
		bf, bl := x.b.loc().Bounds()
		if al != bl {
			t.Fatalf("%s: last seq %d, the leader's %d", x.name, al, bl)
		}
		for seq := max(af, bf); seq <= al; seq++ {
			ra, err1 := x.a.loc().Read(seq)
			rb, err2 := x.b.loc().Read(seq)
			if err1 != nil || err2 != nil {
				t.Fatalf("%s %d: %v / %v", x.name, seq, err1, err2)
			}
			if string(ra.Data) != string(rb.Data) || string(ra.Meta) != string(rb.Meta) || ra.Time != rb.Time || ra.CRC != rb.CRC {
				t.Fatalf("%s %d: %q %q, the leader holds %q %q", x.name, seq, ra.Meta, ra.Data, rb.Meta, rb.Data)
			}
		}
	}
	sa, _ := os.ReadFile(filepath.Join(a.dir, "state.snap"))
	sb, _ := os.ReadFile(filepath.Join(b.dir, "state.snap"))
	if string(sa) != string(sb) || len(sa) == 0 {
		t.Fatalf("state file %q, the leader's %q", sa, sb)
	}
}

// restoreCfg: snapshots every 8 entries, 4 KiB segments.
func restoreCfg() Config {
	return Config{Group: cluster.Config{SnapshotEvery: 8}, SegmentSize: seglog.MinSegmentSize}
}

// TestPairRestoreFromPeer: a replica behind the leader's compacted raft
// log, restarted, fetches the logs and state file from a peer instead
// of stopping, and ends with the same records, position and state as
// the leader; it then serves when it leads.
func TestPairRestoreFromPeer(t *testing.T) {
	tr := newTrio(t, restoreCfg())
	lag, lead := lagBehindSnapshot(t, tr)
	r := tr.open(lag)
	sameLogs(t, r, tr.pairs[lead])
	if err := r.Err(); err != nil {
		t.Fatalf("the restored replica's group stopped: %v", err)
	}
	if m, _, _ := readMark(r.dir); m.gen != 1 {
		t.Fatalf("mark names generation %d, want 1", m.gen)
	}
	for _, name := range []string{"data", "events"} {
		if _, err := os.Stat(filepath.Join(r.dir, name)); !os.IsNotExist(err) {
			t.Fatalf("the old %s log is still there (%v)", name, err)
		}
	}
	// Appended after the restore, on the leader, reaches it too.
	q := tr.pairs[lead]
	if _, err := q.Data().Append(recs(3, "late")); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Data().Sync(); err != nil {
		t.Fatal(err)
	}
	sameLogs(t, r, q)
	// And it reopens from the new generation.
	tr.stop(lag)
	r = tr.open(lag)
	sameLogs(t, r, q)
}

// holdWriter passes the first n bytes of a stream, then blocks until
// released.
type holdWriter struct {
	w       io.Writer
	n       int
	held    chan struct{} // closed when it blocks
	release chan struct{}
	once    sync.Once
}

func (h *holdWriter) Write(b []byte) (int, error) {
	if h.n <= 0 {
		h.once.Do(func() { close(h.held) })
		<-h.release
		return h.w.Write(b)
	}
	k := min(len(b), h.n)
	h.n -= k
	if _, err := h.w.Write(b[:k]); err != nil {
		return 0, err
	}
	if k < len(b) {
		n, err := h.Write(b[k:])
		return k + n, err
	}
	return k, nil
}

// TestPairRestoreCrashMidTransfer: a replica closed in the middle of a
// restore keeps its old logs and mark untouched, and on reopening
// restores again, to the end.
func TestPairRestoreCrashMidTransfer(t *testing.T) {
	tr := newTrio(t, restoreCfg())
	lag, lead := lagBehindSnapshot(t, tr)
	before, _, err := readMark(filepath.Join(tr.base, fmt.Sprint(lag)))
	if err != nil {
		t.Fatal(err)
	}
	hold := &holdWriter{n: 3000, held: make(chan struct{}), release: make(chan struct{})}
	defer close(hold.release)
	tr.net.mu.Lock()
	tr.net.wrap = func(w io.Writer) io.Writer { hold.w = w; return hold }
	tr.net.mu.Unlock()
	r := tr.open(lag)
	<-hold.held // records are arriving
	tr.stop(lag)
	// The replica may apply entries its own raft log already held
	// (the old leader's empty entry) before it learns it is behind,
	// so the mark's index may move; what it must not do is move to the
	// incoming generation or its positions.
	after, _, err := readMark(r.dir)
	if err != nil || after.index < before.index || after.gen != before.gen ||
		after.nextData != before.nextData || after.nextEv != before.nextEv || after.stateAt != before.stateAt {
		t.Fatalf("mark after the cut transfer %+v (%v), before %+v", after, err, before)
	}
	old, err := seglog.Open(filepath.Join(r.dir, "data"), seglog.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, last := old.Bounds(); last+1 != before.nextData {
		t.Fatalf("old data log ends at %d, its mark says %d", last, before.nextData-1)
	}
	old.Close()
	tr.net.mu.Lock()
	tr.net.wrap = nil
	tr.net.mu.Unlock()
	r = tr.open(lag)
	sameLogs(t, r, tr.pairs[lead])
}

// flipWriter flips one byte of a stream, at offset at, once.
type flipWriter struct {
	w   io.Writer
	at  int
	off int
}

func (f *flipWriter) Write(b []byte) (int, error) {
	if f.at >= f.off && f.at < f.off+len(b) {
		c := append([]byte(nil), b...)
		c[f.at-f.off] ^= 0x40
		b = c
	}
	f.off += len(b)
	return f.w.Write(b)
}

// TestPairRestoreRefusesCorruptStream: a stream damaged in transit is
// refused (nothing installed from it) and the restore is tried again,
// to the same end as an undamaged one.
func TestPairRestoreRefusesCorruptStream(t *testing.T) {
	for _, at := range []int{9, 400, 5000} { // the header, a record, further on
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			tr := newTrio(t, restoreCfg())
			lag, lead := lagBehindSnapshot(t, tr)
			var once sync.Once
			tr.net.mu.Lock()
			tr.net.wrap = func(w io.Writer) io.Writer {
				var out io.Writer = w
				once.Do(func() { out = &flipWriter{w: w, at: at} })
				return out
			}
			tr.net.mu.Unlock()
			r := tr.open(lag)
			sameLogs(t, r, tr.pairs[lead])
			if n := r.restoreFailures.Load(); n == 0 {
				t.Fatal("the damaged stream was taken")
			}
			if m, _, _ := readMark(r.dir); m.gen != 1 {
				t.Fatalf("mark names generation %d, want 1 (one restore installed)", m.gen)
			}
		})
	}
}

// TestPairRestoreNewReplica: a replica added to the group later, on an
// empty directory, catches up from a peer's logs (the leader compacted
// its raft log long before), then from the log.
func TestPairRestoreNewReplica(t *testing.T) {
	tr := newTrio(t, restoreCfg())
	lead := tr.leader()
	p := tr.pairs[lead]
	for i := 0; i < 50; i++ {
		if _, err := p.Data().Append(recs(2, fmt.Sprintf("n%d-", i))); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Data().Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.WriteState("state.snap", []byte("S")); err != nil {
		t.Fatal(err)
	}
	if err := p.Data().TruncateFront(40); err != nil {
		t.Fatal(err)
	}
	add := pb.ConfChangeType_ConfChangeAddNode
	id := uint64(4)
	if _, err := p.Group().ProposeConfChange(context.Background(), &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: &add, NodeId: &id}}}); err != nil {
		t.Fatal(err)
	}
	// Past another snapshot, the first whose configuration holds 4.
	for i := 0; i < 12; i++ {
		if _, err := p.Data().Append(recs(1, fmt.Sprintf("c%d-", i))); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Data().Sync(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := tr.cfg
	every := cfg.Group.SnapshotEvery
	cfg.Group = testGroupCfg(4, []uint64{1, 2, 3, 4})
	cfg.Group.SnapshotEvery, cfg.Group.Join = every, true
	cfg.Group.Fetch = tr.net.fetcher(4)
	cfg.Transport, cfg.Tick = tr.net, 2*time.Millisecond
	n, err := Open(filepath.Join(tr.base, "4"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr.net.set(4, n.Group())
	tr.pairs[4] = n
	t.Cleanup(func() {
		if t.Failed() {
			for id, q := range tr.pairs {
				st, err := q.Group().Status(context.Background())
				t.Logf("%d: seen %d data %d ev %d err %v/%v status %+v", id, q.seen.Load(), q.Data().Durable(), q.Events().Durable(), q.Err(), err, st)
			}
		}
	})
	sameLogs(t, n, p)
	if m, _, _ := readMark(n.dir); m.gen != 1 {
		t.Fatalf("mark names generation %d, want 1 (restored from a peer)", m.gen)
	}
	if _, err := p.Data().Append(recs(1, "after")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Data().Sync(); err != nil {
		t.Fatal(err)
	}
	sameLogs(t, n, p)
}

// TestSettleGen: Open after a crash past the switch to generation 1
// moves the staged state files into place and removes the old
// generation and a newer one a failed restore left; an old-format mark
// (no generation) names generation 0.
func TestSettleGen(t *testing.T) {
	dir := t.TempDir()
	mk := func(path, data string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk(filepath.Join(dir, "data", "x.seg"), "old")
	mk(filepath.Join(dir, "events", "x.seg"), "old")
	mk(filepath.Join(dir, "state.snap"), "old state")
	mk(filepath.Join(dir, "logs.1", "data", "x.seg"), "new")
	mk(filepath.Join(dir, "logs.1", "state", "state.snap"), "new state")
	mk(filepath.Join(dir, "logs.2", "data", "x.seg"), "partial")
	if err := settleGen(dir, 1); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"state.snap": "new state", "logs.1/data/x.seg": "new"} {
		if b, err := os.ReadFile(filepath.Join(dir, path)); err != nil || string(b) != want {
			t.Fatalf("%s: %q %v, want %q", path, b, err, want)
		}
	}
	for _, gone := range []string{"data", "events", "logs.2", "logs.1/state"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Fatalf("%s still there (%v)", gone, err)
		}
	}
	if err := settleGen(dir, 1); err != nil { // again, as a second crash would
		t.Fatal(err)
	}
	old := []byte(markV1Magic)
	for _, v := range []uint64{7, 3, 2, 0} {
		old = binary.AppendUvarint(old, v)
	}
	old = binary.LittleEndian.AppendUint32(old, crc32.ChecksumIEEE(old))
	if m, err := decodeMark(old); err != nil || m != (mark{index: 7, nextData: 3, nextEv: 2}) {
		t.Fatalf("old mark decodes to %+v, %v", m, err)
	}
	m := mark{index: 9, nextData: 4, nextEv: 5, stateAt: 8, gen: 3}
	if got, err := decodeMark(encodeMark(m)); err != nil || got != m {
		t.Fatalf("mark round trip: %+v, %v", got, err)
	}
}
