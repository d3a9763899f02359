package seglog

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestTruncatedSegmentsUnmappedInBackground: a segment removed by
// TruncateFront is unmapped at the next TruncateFront, now on a goroutine
// of its own (freeing a big file's blocks stalled the caller for 50-80 ms
// on ext4 with `discard`). The mapping does go away, and Close waits for
// the goroutine (no leak).
func TestTruncatedSegmentsUnmappedInBackground(t *testing.T) {
	before := runtime.NumGoroutine()
	dir := t.TempDir()
	l, segs, _ := fourSegments(t, dir)
	first := filepath.Join(dir, segName(segs[0].First))
	ino := inode(t, first) // the file may be renamed to a spare
	if !mappedIno(t, ino) {
		t.Fatal("first segment not mapped before truncation")
	}
	if err := l.TruncateFront(segs[1].First); err != nil { // first segment -> graveyard
		t.Fatal(err)
	}
	if err := l.TruncateFront(segs[2].First); err != nil { // releases it, in the background
		t.Fatal(err)
	}
	waitFor(t, "the truncated segment to be unmapped", func() bool { return !mappedIno(t, ino) })
	if err := l.TruncateFront(segs[3].First); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

// mappedIno reports whether this process maps the file with inode ino.
func mappedIno(t *testing.T, ino uint64) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		// address perms offset dev inode path
		if f := strings.Fields(line); len(f) >= 6 && f[4] == strconv.FormatUint(ino, 10) {
			return true
		}
	}
	return false
}
