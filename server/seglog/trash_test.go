package seglog

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// truncRecorder is the OS file system with a record of every Truncate
// (path, new size): a tool to watch how a file is deleted.
type truncRecorder struct {
	osFS
	mu    sync.Mutex
	sizes map[string][]int64 // Truncate sizes by path
}

type recFile struct {
	osFile
	fs   *truncRecorder
	path string
}

func (r *truncRecorder) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return recFile{osFile{f}, r, name}, nil
}

func (f recFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	f.fs.sizes[f.path] = append(f.fs.sizes[f.path], size)
	f.fs.mu.Unlock()
	return f.osFile.Truncate(size)
}

func newTruncRecorder() *truncRecorder {
	return &truncRecorder{sizes: map[string][]int64{}}
}

func trashFiles(t *testing.T, dir string) []string { return namesWithSuffix(t, dir, trashExt) }

// namesWithSuffix lists the directory entries of dir ending in suffix.
func namesWithSuffix(t *testing.T, dir, suffix string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), suffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestUnrecycledSegmentDeletedGradually: a truncated segment that does not
// become a spare is not unlinked with all its blocks at once (on ext4 with
// discard that stalled every concurrent fsync for 13-21 ms): TruncateFront
// renames it to a trash file, and once its map is released it is shrunk
// step by step and then removed. The records left stay readable.
func TestUnrecycledSegmentDeletedGradually(t *testing.T) {
	dir := t.TempDir()
	rec := newTruncRecorder()
	l := recycleLog(t, dir, Options{FS: rec, NoRecycle: true}, 400)
	defer l.Close()
	l.trash.step = 16 << 10
	segs := l.Segments()
	if len(segs) < 4 {
		t.Fatalf("want at least 4 segments, got %d", len(segs))
	}
	if err := l.TruncateFront(segs[2].First); err != nil { // drops 2
		t.Fatal(err)
	}
	trash := trashFiles(t, dir)
	if len(trash) != 2 {
		t.Fatalf("after TruncateFront: trash files %v, want 2 (the dropped segments, still mapped)", trash)
	}
	for _, s := range segs[:2] {
		if _, err := os.Stat(filepath.Join(dir, segName(s.First))); !os.IsNotExist(err) {
			t.Fatalf("truncated segment %d still under its name: %v", s.First, err)
		}
	}
	if err := l.TruncateFront(segs[2].First); err != nil { // releases them
		t.Fatal(err)
	}
	l.rel.wait()
	if left := trashFiles(t, dir); len(left) != 0 {
		t.Fatalf("trash files left after the release: %v", left)
	}
	for _, name := range trash {
		sizes := rec.sizes[filepath.Join(dir, name)]
		want := []int64{48 << 10, 32 << 10, 16 << 10} // 64 KiB in 16 KiB steps
		if len(sizes) != len(want) {
			t.Fatalf("%s shrunk through %v, want %v", name, sizes, want)
		}
		for i := range want {
			if sizes[i] != want[i] {
				t.Fatalf("%s shrunk through %v, want %v", name, sizes, want)
			}
		}
	}
	checkRecords(t, l)
}

// TestTrashRemovedByCloseAndOpen: Close removes the trash of segments
// truncated since the last release pass, and Open removes trash a crash
// left behind (it is a temp file).
func TestTrashRemovedByCloseAndOpen(t *testing.T) {
	dir := t.TempDir()
	l := recycleLog(t, dir, Options{NoRecycle: true}, 300)
	segs := l.Segments()
	if err := l.TruncateFront(segs[1].First); err != nil {
		t.Fatal(err)
	}
	if len(trashFiles(t, dir)) != 1 {
		t.Fatalf("want 1 trash file, got %v", trashFiles(t, dir))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if left := trashFiles(t, dir); len(left) != 0 {
		t.Fatalf("Close left trash: %v", left)
	}
	if err := os.WriteFile(filepath.Join(dir, "9"+trashExt), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	reopenWithout(t, dir, trashExt, "a crash's trash")
}

// reopenWithout opens the recycleLog in dir again and checks that Open
// removed every file ending in suffix (what names them) and that every
// record reads back.
func reopenWithout(t *testing.T, dir, suffix, what string) {
	t.Helper()
	l, err := Open(dir, Options{SegmentSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if left := namesWithSuffix(t, dir, suffix); len(left) != 0 {
		t.Fatalf("Open left %s: %v", what, left)
	}
	checkRecords(t, l)
}

// TestCompressedAwayPlainSegmentDeletedGradually: the plain file of a
// segment the compressor replaced goes to the trash too (it is still
// mapped: records read from it are borrowed until the next TruncateFront),
// and is deleted at the next release pass.
func TestCompressedAwayPlainSegmentDeletedGradually(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{SegmentSize: 8 << 10, IndexInterval: 256, Compression: CompressionS2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fill(t, l, 1, 600, 37)
	waitFor(t, "sealed segments compressed", func() bool { return allSealedCompressed(l) })
	sealed := len(l.Segments()) - 1
	// The rename follows the swap Segments shows.
	waitFor(t, "the plain files of the compressed segments in the trash", func() bool { return len(trashFiles(t, dir)) == sealed })
	if n := countFiles(t, dir, segExt); n != 1 {
		t.Fatalf("%d plain segment files, want 1 (the active one)", n)
	}
	if err := l.TruncateFront(1); err != nil { // drops nothing, releases the old maps
		t.Fatal(err)
	}
	l.rel.wait()
	if left := trashFiles(t, dir); len(left) != 0 {
		t.Fatalf("trash left after the release: %v", left)
	}
	verifyAll(t, l, 1, 600)
}

// TestCloseCutsGradualDeletionShort: Close waits for the release goroutine,
// so once it has begun, deletion stops pausing and removes the rest at
// once (a large purge deleted gradually would hold Close for seconds).
func TestCloseCutsGradualDeletionShort(t *testing.T) {
	dir := t.TempDir()
	rec := newTruncRecorder()
	l := recycleLog(t, dir, Options{FS: rec, NoRecycle: true}, 300)
	l.trash.step, l.trash.pause = 1<<10, 20*time.Millisecond // 63 steps, 1.26 s per segment
	segs := l.Segments()
	if err := l.TruncateFront(segs[2].First); err != nil { // drops 2
		t.Fatal(err)
	}
	trash := trashFiles(t, dir)
	if err := l.TruncateFront(segs[2].First); err != nil { // releases them
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if left := trashFiles(t, dir); len(left) != 0 {
		t.Fatalf("trash left after Close: %v", left)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	steps := 0
	for _, name := range trash {
		steps += len(rec.sizes[filepath.Join(dir, name)])
	}
	if steps >= 63 {
		t.Fatalf("%d shrink steps before Close returned: Close waited for the gradual deletion", steps)
	}
}
