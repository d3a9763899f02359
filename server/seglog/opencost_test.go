package seglog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/fibrilmq/fibril/internal/crashfs"
)

// syncDelta returns the file and directory syncs fs made while fn ran.
func syncDelta(t *testing.T, fs *crashfs.FS, fn func()) (files, dirs int) {
	t.Helper()
	f0, d0 := fs.SyncCounts()
	fn()
	f1, d1 := fs.SyncCounts()
	return f1 - f0, d1 - d0
}

// TestOpenOfSmallLogsIsSlow is the regression test for "a broker restart
// with 64 topics took ~36 s": Open and Close of small logs did fsyncs
// (directory syncs for a fresh segment and for the clean marker, a file
// sync of a fresh segment, synced index and marker files at Close) and
// scanned a whole preallocated segment. Now opening and closing cost no
// fsync unless there is something to make durable, and durability is
// unchanged: a crash after a durable append keeps it.
func TestOpenOfSmallLogsIsSlow(t *testing.T) {
	fs := newCrashFS()
	dir := filepath.Join(t.TempDir(), "new", "log")
	opts := Options{FS: fs, SegmentSize: 64 << 10}
	open := func() *Log {
		t.Helper()
		l, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	mustClose := func(l *Log) {
		t.Helper()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(what string, files, dirs, wantFiles, wantDirs int) {
		t.Helper()
		if files != wantFiles || dirs != wantDirs {
			t.Errorf("%s: %d file syncs and %d directory syncs, want %d and %d", what, files, dirs, wantFiles, wantDirs)
		}
	}

	var l *Log
	f, d := syncDelta(t, fs, func() { l = open() })
	expect("creating a log", f, d, 0, 0)
	f, d = syncDelta(t, fs, func() { mustClose(l) })
	expect("closing an untouched new log", f, d, 0, 0)

	f, d = syncDelta(t, fs, func() { l = open() })
	expect("reopening it", f, d, 0, 0)
	if !l.Recovery().Clean {
		t.Fatal("reopening after Close was not clean")
	}
	// The first append drops the marker (a directory sync, which also
	// covers the segment's entry) and the first durable point syncs the
	// parent directory (the log directory's own entry).
	f, d = syncDelta(t, fs, func() { fill(t, l, 1, 20, 5) })
	if f != 4 || d != 2 {
		t.Errorf("first appends: %d file syncs, %d directory syncs; want 4 and 2 (marker, parent)", f, d)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("clean marker still there after an append: %v", err)
	}
	f, d = syncDelta(t, fs, func() { mustClose(l) })
	expect("closing a log whose records are all durable", f, d, 0, 0)

	// Clean open, close without writing: no I/O, the marker stays valid.
	l = open()
	f, d = syncDelta(t, fs, func() { mustClose(l) })
	expect("closing a clean log nobody wrote to", f, d, 0, 0)
	l = open()
	if !l.Recovery().Clean {
		t.Fatal("the marker left in place by an untouched log was not honoured")
	}

	// A crash right after durable appends to a log opened clean: the
	// marker must not hide them, and nothing durable is lost.
	fill(t, l, 21, 60, 7)
	durable := l.Durable()
	l.Abandon()
	if _, err := fs.Crash(nil, crashfs.CrashDropAll); err != nil {
		t.Fatal(err)
	}
	f, d = syncDelta(t, fs, func() { l = open() })
	// The recovered tail, and the entries leading to it.
	expect("opening after a crash", f, d, 1, 2)
	if l.Recovery().Clean {
		t.Fatal("open after a crash claimed a clean shutdown")
	}
	if _, last := l.Bounds(); last < durable {
		t.Fatalf("after the crash last = %d, durable was %d", last, durable)
	}
	verifyAll(t, l, 1, int(durable))
	mustClose(l)
}

// TestStaleIndexOfSealedSegmentIsNotTrusted: index files are written
// without fsync, so a power cut may leave an older index of a segment (one
// a Close wrote while it was active). Open must notice the records past
// its end instead of reporting them missing.
func TestStaleIndexOfSealedSegmentIsNotTrusted(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: MinSegmentSize}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 1, 10, 5)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	idx := idxPath(dir, 1)
	stale, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	if l, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	fill(t, l, 11, 400, 10) // rolls past the first segment
	if n := len(l.Segments()); n < 2 {
		t.Fatalf("%d segments, want a roll", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(idx, stale, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatalf("open with a stale index: %v", err)
	}
	defer l.Close()
	verifyAll(t, l, 1, 400)
}
