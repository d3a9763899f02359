package seglog

import (
	"os"
	"path/filepath"
	"runtime"
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
	if !mapped(t, first) {
		t.Fatal("first segment not mapped before truncation")
	}
	if err := l.TruncateFront(segs[1].First); err != nil { // first segment -> graveyard
		t.Fatal(err)
	}
	if err := l.TruncateFront(segs[2].First); err != nil { // releases it, in the background
		t.Fatal(err)
	}
	waitFor(t, "the truncated segment to be unmapped", func() bool { return !mapped(t, first) })
	if err := l.TruncateFront(segs[3].First); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

// mapped reports whether this process maps path (deleted or not).
func mapped(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	return strings.Contains(string(b), path)
}
