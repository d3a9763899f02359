package seglog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// diskUse returns a file's size and the bytes of disk it holds.
func diskUse(t *testing.T, path string) (size, used int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size(), fi.Sys().(*syscall.Stat_t).Blocks * 512
}

// TestNewLogDoesNotPreallocateWholeSegment is the regression test for
// "every new log preallocates a whole segment": a broker with many small
// topics held SegmentSize (64 MiB) of disk per log. The active segment now
// starts at firstAlloc (a segment after a roll at initialAlloc) and doubles
// as appends reach its end, and the file always covers the map.
func TestNewLogDoesNotPreallocateWholeSegment(t *testing.T) {
	const limit = 8 << 20
	l, dir := openTest(t, Options{SegmentSize: limit})
	path := filepath.Join(dir, segName(1))
	if size, used := diskUse(t, path); size != firstAlloc || used > 2*firstAlloc {
		t.Fatalf("new segment: size %d, %d bytes on disk; want %d", size, used, firstAlloc)
	}
	if _, err := l.Append([]Entry{{Data: []byte("small")}}); err != nil {
		t.Fatal(err)
	}
	first, err := l.Read(1)
	if err != nil {
		t.Fatal(err)
	}
	borrowed := first.Data // must stay valid while the segment grows

	data := bytes.Repeat([]byte{0xa5}, 60<<10)
	var wantSizes []int64 // the first 60 KiB record jumps past 16 and 32 KiB
	for size := int64(64 << 10); size <= limit; size *= 2 {
		wantSizes = append(wantSizes, size)
	}
	seen := map[int64]bool{}
	for seq := Seq(2); ; seq++ {
		if _, err := l.Append([]Entry{{Data: data}}); err != nil {
			t.Fatal(err)
		}
		segs := l.Segments()
		if len(segs) > 1 {
			if segs[0].Allocated != limit || segs[1].Allocated != initialAlloc {
				t.Fatalf("after the roll: %+v", segs)
			}
			break
		}
		size, _ := diskUse(t, path)
		if size != segs[0].Allocated || size < segs[0].Bytes+segHeaderSize {
			t.Fatalf("seq %d: file is %d bytes, log allocated %d and used %d", seq, size, segs[0].Allocated, segs[0].Bytes)
		}
		seen[size] = true
	}
	for _, s := range wantSizes {
		if !seen[s] {
			t.Errorf("the segment never had size %d (saw %v)", s, seen)
		}
	}
	if string(borrowed) != "small" {
		t.Fatalf("a record read before the segment grew changed: %q", borrowed)
	}
	_, last := l.Bounds()
	verifyGrown(t, l, last, data)

	// After a crash the grown segments recover like any other.
	l.Abandon()
	l2, err := Open(dir, Options{SegmentSize: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if _, got := l2.Bounds(); got != last {
		t.Fatalf("after reopening: last %d, want %d", got, last)
	}
	verifyGrown(t, l2, last, data)
}

func verifyGrown(t *testing.T, l *Log, last Seq, data []byte) {
	t.Helper()
	for seq := Seq(2); seq <= last; seq++ {
		r, err := l.Read(seq)
		if err != nil || !bytes.Equal(r.Data, data) {
			t.Fatalf("read %d: %v (%d bytes)", seq, err, len(r.Data))
		}
	}
}

// TestGrowOnFullDiskIsAnError: when the active segment must grow and the
// disk is full, Append fails with ErrWriteFailed before writing anything,
// and works again once space returns.
func TestGrowOnFullDiskIsAnError(t *testing.T) {
	for _, viaMap := range []bool{false, true} {
		fs := newCrashFS()
		opts := Options{SegmentSize: 4 << 20, FS: fs, writeViaMap: viaMap}
		l, dir := openTest(t, opts)
		data := bytes.Repeat([]byte{7}, 3<<10)
		n := 0
		for ; int64(n+1)*recordSize(0, len(data)) < firstAlloc-segHeaderSize; n++ {
			if _, err := l.Append([]Entry{{Data: data}}); err != nil {
				t.Fatal(err)
			}
		}
		fs.FailAllocate(syscall.ENOSPC)
		if _, err := l.Append([]Entry{{Data: data}}); !errors.Is(err, ErrWriteFailed) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append past the allocation on a full disk: %v", err)
		}
		if _, last := l.Bounds(); last != Seq(n) {
			t.Fatalf("after the failed append last = %d, want %d", last, n)
		}
		if size, _ := diskUse(t, filepath.Join(dir, segName(1))); size != firstAlloc {
			t.Fatalf("file is %d bytes after a failed preallocation", size)
		}
		fs.FailAllocate(nil)
		if _, err := l.Append([]Entry{{Data: data}}); err != nil {
			t.Fatal(err)
		}
		verifyGrown(t, l, Seq(n+1), data)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l2, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, last := l2.Bounds(); last != Seq(n+1) {
			t.Fatalf("reopened: last %d, want %d", last, n+1)
		}
		l2.Close()
	}
}
