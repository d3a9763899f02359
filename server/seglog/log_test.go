package seglog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fibrilmq/fibril/internal/crashfs"
)

// openTest opens a log in a fresh temporary directory.
func openTest(t *testing.T, opts Options) (*Log, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, dir
}

func TestLogContract(t *testing.T) {
	for _, p := range []Policy{PolicySync, PolicyCaller, PolicyNone} {
		t.Run(p.String(), func(t *testing.T) {
			runStoreContract(t, func(t *testing.T) Store {
				l, _ := openTest(t, Options{Policy: p, SegmentSize: 8 << 10, IndexInterval: 256})
				return l
			}, p == PolicySync)
		})
	}
}

// fill appends records n..m (entry(i) each) in batches of batch.
func fill(t *testing.T, s Store, n, m, batch int) {
	t.Helper()
	for i := n; i <= m; i += batch {
		var b []Entry
		for j := i; j < i+batch && j <= m; j++ {
			b = append(b, entry(j))
		}
		first, err := s.Append(b)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if first != Seq(i) {
			t.Fatalf("append %d got first %d", i, first)
		}
	}
}

// verifyAll checks that s holds exactly entry(i) for i in [from, to].
func verifyAll(t *testing.T, s Store, from, to int) {
	t.Helper()
	f, l := s.Bounds()
	if f > Seq(from) || l != Seq(to) {
		t.Fatalf("bounds %d,%d; want first <= %d, last %d", f, l, from, to)
	}
	for i := from; i <= to; i++ {
		r, err := s.Read(Seq(i))
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		wantRecord(t, r, Seq(i), i)
	}
	next := from
	err := s.Scan(Seq(from), 0, func(r Record) bool {
		wantRecord(t, r, Seq(next), next)
		next++
		return true
	})
	if err != nil || next != to+1 {
		t.Fatalf("scan ended at %d (%v), want %d", next, err, to+1)
	}
}

func TestLogReopenClean(t *testing.T) {
	opts := Options{SegmentSize: 4 << 10, IndexInterval: 200}
	l, dir := openTest(t, opts)
	fill(t, l, 1, 500, 7)
	if len(l.segs) < 5 {
		t.Fatalf("only %d segments; the test wants several", len(l.segs))
	}
	verifyAll(t, l, 1, 500)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	rec := l2.Recovery()
	if !rec.Clean || rec.ScannedBytes != 0 || rec.RebuiltIndexes != 0 {
		t.Fatalf("clean reopen did work: %+v", rec)
	}
	verifyAll(t, l2, 1, 500)
	if l2.Durable() != 500 {
		t.Fatalf("durable %d after reopen", l2.Durable())
	}
	fill(t, l2, 501, 600, 10)
	verifyAll(t, l2, 1, 600)
}

func TestLogReopenAfterCrashScans(t *testing.T) {
	opts := Options{SegmentSize: 4 << 10, IndexInterval: 200}
	l, dir := openTest(t, opts)
	fill(t, l, 1, 300, 5)
	l.Abandon()
	l2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if rec := l2.Recovery(); rec.Clean || rec.ScannedBytes == 0 {
		t.Fatalf("unclean reopen skipped the scan: %+v", rec)
	}
	verifyAll(t, l2, 1, 300)
}

func TestLogLocked(t *testing.T) {
	_, dir := openTest(t, Options{})
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
}

// TestLogLockedNamesTheOtherProcess: a log another process holds is
// refused with an error that says so and gives that process's pid (it
// used to say "locked by another user").
func TestLogLockedNamesTheOtherProcess(t *testing.T) {
	if dir := os.Getenv("SEGLOG_TEST_HOLD"); dir != "" {
		// The child: hold the log until stdin closes.
		l, err := Open(dir, Options{})
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(1)
		}
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		l.Close()
		os.Exit(0)
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLogLockedNamesTheOtherProcess$")
	cmd.Env = append(os.Environ(), "SEGLOG_TEST_HOLD="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	_, err = Open(dir, Options{})
	want := fmt.Sprintf("locked by another process: %s (pid %d holds it)", dir, cmd.Process.Pid)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open: %v, want ErrLocked saying %q", err, want)
	}
}

func TestLogTruncateFrontDeletesSegments(t *testing.T) {
	opts := Options{SegmentSize: 4 << 10}
	l, dir := openTest(t, opts)
	fill(t, l, 1, 400, 4)
	before := len(l.segs)
	if err := l.TruncateFront(250); err != nil {
		t.Fatal(err)
	}
	first, _ := l.Bounds()
	if first > 250 || len(l.segs) >= before {
		t.Fatalf("after TruncateFront(250): first %d, %d of %d segments", first, len(l.segs), before)
	}
	verifyAll(t, l, 250, 400)
	names, _ := os.ReadDir(dir)
	segFiles := 0
	for _, n := range names {
		if strings.HasSuffix(n.Name(), segExt) {
			segFiles++
		}
	}
	if segFiles != len(l.segs) {
		t.Fatalf("%d segment files on disk, %d in use", segFiles, len(l.segs))
	}
	l.Close()
	l2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if f2, _ := l2.Bounds(); f2 != first {
		t.Fatalf("first after reopen %d, want %d", f2, first)
	}
	verifyAll(t, l2, int(first), 400)
}

func TestSegmentSizeGrowsBetweenOpens(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int64{4 << 10, 64 << 10} { // an empty small segment, then a bigger size
		l, err := Open(dir, Options{SegmentSize: size})
		if err != nil {
			t.Fatal(err)
		}
		if size == 4<<10 {
			l.Close()
			continue
		}
		defer l.Close()
		big := Entry{Meta: []byte("big"), Data: make([]byte, 10<<10)}
		for i := 0; i < 2; i++ {
			if _, err := l.Append([]Entry{big}); err != nil {
				t.Fatal(err)
			}
		}
		for seq := Seq(1); seq <= 2; seq++ {
			if r, err := l.Read(seq); err != nil || len(r.Data) != 10<<10 {
				t.Fatalf("read %d: %v", seq, err)
			}
		}
	}
}

func TestFileShrunkUnderTheMapIsAnError(t *testing.T) {
	l, dir := openTest(t, Options{SegmentSize: 64 << 10})
	fill(t, l, 1, 100, 10)
	path := filepath.Join(dir, segName(1))
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(100); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read past the shrunk end: %v, want ErrCorrupt (and no crash)", err)
	}
	if err := l.Scan(1, 0, func(Record) bool { return true }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("scan past the shrunk end: %v, want ErrCorrupt", err)
	}
}

// TestCallerPolicyDurableOnlyAfterSync: under PolicyCaller Append only
// writes (nothing durable, nothing fsynced) and Sync makes the records
// durable: they survive a crash that drops everything never synced.
func TestCallerPolicyDurableOnlyAfterSync(t *testing.T) {
	fs := newCrashFS()
	opts := Options{Policy: PolicyCaller, FS: fs}
	l, dir := openTest(t, opts)
	fill(t, l, 1, 2, 2)
	if files, _ := fs.SyncCounts(); l.Durable() != 0 || files != 0 || fs.Unsynced(lockName) == 0 {
		t.Fatalf("Append under PolicyCaller synced: durable %d, %d file syncs, %d bytes unsynced", l.Durable(), files, fs.Unsynced(lockName))
	}
	d, err := l.Sync()
	if err != nil || d != 2 || l.Durable() != 2 || fs.Unsynced(lockName) != 0 {
		t.Fatalf("Sync = %d, %v; durable %d, %d bytes unsynced", d, err, l.Durable(), fs.Unsynced(lockName))
	}
	fill(t, l, 3, 3, 1) // never synced: lost
	l.Abandon()
	if _, err := fs.Crash(nil, crashfs.CrashDropAll); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	verifyAll(t, l2, 1, 2)
}

func TestSealedSegmentsHoldNoDescriptor(t *testing.T) {
	l, dir := openTest(t, Options{SegmentSize: 4 << 10})
	fill(t, l, 1, 200, 5)
	check := func(l *Log) {
		t.Helper()
		for i, s := range l.segs {
			if active := i == len(l.segs)-1; (s.f != nil) != active {
				t.Fatalf("segment %d of %d: descriptor open = %v", i, len(l.segs), s.f != nil)
			}
		}
	}
	check(l)
	l.Close()
	l2, err := Open(dir, Options{SegmentSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	check(l2)
	verifyAll(t, l2, 1, 200)
}

func TestSegmentsDriveRetention(t *testing.T) {
	l, _ := openTest(t, Options{SegmentSize: 4 << 10})
	fill(t, l, 1, 300, 5)
	segs := l.Segments()
	if len(segs) < 3 || segs[0].First != 1 || !segs[len(segs)-1].Active || segs[len(segs)-1].Last != 300 {
		t.Fatalf("segments %+v", segs)
	}
	for i := 1; i < len(segs); i++ {
		if segs[i].First != segs[i-1].Last+1 || segs[i-1].Active || segs[i-1].Bytes <= 0 || segs[i-1].Allocated != 4<<10 {
			t.Fatalf("segment %d: %+v after %+v", i, segs[i], segs[i-1])
		}
	}
	// Drop the two oldest segments, as a max_bytes policy would.
	if err := l.TruncateFront(segs[1].Last + 1); err != nil {
		t.Fatal(err)
	}
	if first, _ := l.Bounds(); first != segs[2].First {
		t.Fatalf("first %d after truncating two segments, want %d", first, segs[2].First)
	}
	if got := l.Segments(); len(got) != len(segs)-2 {
		t.Fatalf("%d segments left, want %d", len(got), len(segs)-2)
	}
}

// TestLogStart: a new log opened with Start numbers its first record
// Start, and keeps going from its records after a reopen, where Start
// no longer counts.
func TestLogStart(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Start: 100, SegmentSize: MinSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	if first, last := l.Bounds(); first != 100 || last != 99 {
		t.Fatalf("new log's bounds %d..%d, want 100..99", first, last)
	}
	if seq, err := l.Append([]Entry{{Data: []byte("a")}, {Data: []byte("b")}}); err != nil || seq != 100 {
		t.Fatalf("first append: %d %v, want 100", seq, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, start := range []Seq{0, 7, 500} {
		l, err = Open(dir, Options{Start: start, SegmentSize: MinSegmentSize})
		if err != nil {
			t.Fatal(err)
		}
		first, last := l.Bounds()
		r, rerr := l.Read(101)
		got := string(r.Data) // the record borrows the log's map
		l.Close()
		if first != 100 || last != 101 || rerr != nil || got != "b" {
			t.Fatalf("reopened with Start %d: bounds %d..%d, record 101 %q %v", start, first, last, got, rerr)
		}
	}
}
