package seglog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fibrilmq/fibril/internal/crashfs"
)

// recycleLog opens a log of 64 KiB segments in dir and appends n records of
// 1000 bytes (record i holds byte i%251 throughout).
func recycleLog(t *testing.T, dir string, opts Options, n int) *Log {
	t.Helper()
	opts.SegmentSize = 64 << 10
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, n)
	return l
}

func recPayload(seq Seq) []byte { return bytes.Repeat([]byte{byte(seq % 251)}, 1000) }

func appendN(t *testing.T, l *Log, n int) {
	t.Helper()
	for range n {
		_, last := l.Bounds()
		if _, err := l.Append([]Entry{{Data: recPayload(last + 1)}}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkRecords reads every record the log holds and checks its payload.
func checkRecords(t *testing.T, l *Log) {
	t.Helper()
	first, last := l.Bounds()
	for seq := first; seq <= last; seq++ {
		r, err := l.Read(seq)
		if err != nil {
			t.Fatalf("Read(%d): %v", seq, err)
		}
		if !bytes.Equal(r.Data, recPayload(seq)) {
			t.Fatalf("Read(%d): wrong payload", seq)
		}
	}
}

// spareFiles lists the spare files in dir and their inode numbers.
func spareFiles(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), spareExt) {
			out[e.Name()] = inode(t, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// truncateAndRelease drops the segments below seq, then releases them (a
// second TruncateFront) and waits for the release goroutine.
func truncateAndRelease(t *testing.T, l *Log, seq Seq) {
	t.Helper()
	if err := l.TruncateFront(seq); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateFront(seq); err != nil {
		t.Fatal(err)
	}
	l.rel.wait()
}

// TestTruncatedSegmentIsRecycled: full segments dropped by TruncateFront
// become at most two spare files, their bytes left as they are (not unlinked: freeing a segment's
// blocks stalled the log's fsyncs for 50-80 ms on ext4 with discard), the
// next rolls reuse those very files, every record stays readable before and
// after a reopen, and Close leaves no spare behind.
func TestTruncatedSegmentIsRecycled(t *testing.T) {
	dir := t.TempDir()
	l := recycleLog(t, dir, Options{}, 400) // about 6 segments of 64 KiB
	segs := l.Segments()
	if len(segs) < 5 {
		t.Fatalf("want at least 5 segments, got %d", len(segs))
	}
	truncateAndRelease(t, l, segs[3].First) // drops 3 full segments
	spares := spareFiles(t, dir)
	if len(spares) != 2 {
		t.Fatalf("want 2 spare files (the cap), got %v", spares)
	}
	for name := range spares {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		// Kept as they were: clearing them would turn their blocks back
		// into unwritten extents, which makes every fsync dearer.
		if int64(len(b)) != 64<<10 || bytes.Count(b, []byte{0}) > len(b)/2 {
			t.Fatalf("spare %s: %d bytes, %d of them zero; want the old records kept", name, len(b), bytes.Count(b, []byte{0}))
		}
	}
	for _, s := range segs[:3] {
		if _, err := os.Stat(filepath.Join(dir, segName(s.First))); !os.IsNotExist(err) {
			t.Fatalf("truncated segment %d still there: %v", s.First, err)
		}
	}
	reused := map[uint64]bool{}
	for _, ino := range spares {
		reused[ino] = true
	}
	before := len(l.Segments())
	appendN(t, l, 200) // three more rolls
	if left := spareFiles(t, dir); len(left) != 0 {
		t.Fatalf("spares not reused by the rolls: %v", left)
	}
	hits := 0
	for _, s := range l.Segments()[before-1:] {
		if reused[inode(t, filepath.Join(dir, segName(s.First)))] {
			hits++
		}
	}
	if hits != 2 {
		t.Fatalf("%d of the new segments are the spare files, want 2", hits)
	}
	checkRecords(t, l)
	truncateAndRelease(t, l, l.Segments()[len(l.Segments())-2].First)
	if len(spareFiles(t, dir)) == 0 {
		t.Fatal("no spare after the second truncation")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if left := spareFiles(t, dir); len(left) != 0 {
		t.Fatalf("Close left spares: %v", left)
	}
	l2, err := Open(dir, Options{SegmentSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	checkRecords(t, l2)
}

// TestNoRecycleRemovesSegments: with NoRecycle nothing is kept.
func TestNoRecycleRemovesSegments(t *testing.T) {
	dir := t.TempDir()
	l := recycleLog(t, dir, Options{NoRecycle: true}, 300)
	defer l.Close()
	truncateAndRelease(t, l, l.Segments()[3].First)
	if s := spareFiles(t, dir); len(s) != 0 {
		t.Fatalf("spares with NoRecycle: %v", s)
	}
}

// TestRecycledSegmentCrash: a crash with records written (not synced) into
// segments that are reused spares, their old records still in them, loses
// only those records: no record of a file's earlier life comes back (its
// numbers are below the segment's), and a torn write there (crashfs.CrashSectors:
// some sectors of a record back to the old bytes, later ones on disk) is
// cut as torn, not taken for corruption, because no later record's hint
// claims it durable. (Reusing spares without zeroing them made Open refuse
// to start after such a crash before records carried the hint.) A crash
// with spares on disk leaves them to Open, which deletes them.
func TestRecycledSegmentCrash(t *testing.T) {
	for _, mode := range []crashfs.CrashMode{crashfs.CrashDropAll, crashfs.CrashSectors, crashfs.CrashCut} {
		for seed := range 6 {
			t.Run(fmt.Sprint(mode, "/", seed), func(t *testing.T) {
				dir := t.TempDir()
				fs := newCrashFS()
				opts := Options{FS: fs, Policy: PolicyNone}
				l := recycleLog(t, dir, opts, 400)
				if _, err := l.Sync(); err != nil {
					t.Fatal(err)
				}
				truncateAndRelease(t, l, l.Segments()[3].First)
				if len(spareFiles(t, dir)) != 2 {
					t.Fatal("no spares to reuse")
				}
				durable, err := l.Sync()
				if err != nil {
					t.Fatal(err)
				}
				appendN(t, l, 200) // into the reused spares, un-synced
				if len(spareFiles(t, dir)) != 0 {
					t.Fatal("spares not reused")
				}
				l.Abandon()
				if _, err := fs.Crash(rand.New(rand.NewPCG(uint64(mode), uint64(seed))), mode); err != nil {
					t.Fatal(err)
				}
				l2, err := Open(dir, Options{FS: fs, SegmentSize: 64 << 10})
				if err != nil {
					t.Fatalf("open after crash: %v", err)
				}
				defer l2.Close()
				_, last := l2.Bounds()
				if last < durable {
					t.Fatalf("lost durable records: last %d < durable %d", last, durable)
				}
				checkRecords(t, l2)
			})
		}
	}
}

// TestLeftoverSparesRemovedAtOpen: spare files a crash left behind are
// deleted by Open and never taken for segments.
func TestLeftoverSparesRemovedAtOpen(t *testing.T) {
	dir := t.TempDir()
	l := recycleLog(t, dir, Options{}, 300)
	truncateAndRelease(t, l, l.Segments()[3].First)
	if len(spareFiles(t, dir)) == 0 {
		t.Fatal("no spares")
	}
	l.Abandon()
	if len(spareFiles(t, dir)) == 0 {
		t.Fatal("Abandon removed the spares (a crash would not)")
	}
	reopenWithout(t, dir, spareExt, "spares")
}

// TestTornSegmentAfterFullTruncationKeepsSequence: every sealed segment is
// truncated away and the active one (just rolled to) never reached the
// disk; the next Open must go on from that segment's first sequence
// number, not start over at 1 (found by TestCrashRecoveryWithTruncation:
// numbers would be handed out again).
func TestTornSegmentAfterFullTruncationKeepsSequence(t *testing.T) {
	for _, recycle := range []bool{false, true} {
		t.Run(fmt.Sprint("recycle=", recycle), func(t *testing.T) {
			dir := t.TempDir()
			fs := newCrashFS()
			opts := Options{FS: fs, Policy: PolicyNone, SegmentSize: 64 << 10, NoRecycle: !recycle}
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			for len(l.Segments()) < 4 {
				appendN(t, l, 1)
			}
			segs := l.Segments()
			active := segs[len(segs)-1].First
			truncateAndRelease(t, l, active) // all sealed segments gone
			l.Abandon()
			if _, err := fs.Crash(nil, crashfs.CrashDropAll); err != nil { // the active one's header too
				t.Fatal(err)
			}
			l2, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Close()
			if first, last := l2.Bounds(); first != active || last != active-1 {
				t.Fatalf("Bounds after the crash = %d, %d; want %d, %d", first, last, active, active-1)
			}
			seq, err := l2.Append([]Entry{{Data: recPayload(active)}})
			if err != nil || seq != active {
				t.Fatalf("next append got seq %d (%v), want %d", seq, err, active)
			}
		})
	}
}
