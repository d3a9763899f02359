package seglog

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// Deleting segment files gradually.
//
// A truncated segment that does not become a spare (see recycle.go) is
// renamed to a trash file (<n>.trash.tmp) by TruncateFront and deleted by
// the release goroutine once its map is released: shrunk deleteStep bytes
// at a time with a pause between steps, then unlinked empty.
//
// Why: the last reference to a 64 MiB file going away frees all of its
// blocks at once, and on an ext4 disk mounted with `discard` every fsync
// issued meanwhile (the group commits of every partition) waited for it.
// BenchmarkDeleteUnderFsync on the benchmark VM (2 vCPUs, virtio disk,
// 3 runs of 5): unlinking a 64 MiB file whose pages were mapped took
// 18-19 ms, and the worst fdatasync of a loop running alongside took
// 14.6-16.6 ms (p50 0.2 ms); shrinking the same file by 4 MiB steps with
// 1 ms pauses took 39-43 ms, with that worst fdatasync at 2.0-2.2 ms. Trash files are temp files: Open deletes
// leftovers of a crash (as it does every *.tmp).
const (
	trashExt    = ".trash" + tmpExt
	deleteStep  = 4 << 20
	deletePause = time.Millisecond
)

// trashBin names trash files and deletes them gradually.
type trashBin struct {
	seq   atomic.Uint64 // names of trash files
	step  int64         // deleteGradually's step and pause (tests change them)
	pause time.Duration
}

// toTrash renames s's file to a fresh trash file, to be deleted gradually
// once its map is released; false if the rename failed (the file is then
// still under its name).
func (l *Log) toTrash(s *segment) bool {
	tp := filepath.Join(l.dir, fmt.Sprintf("%d%s", l.trash.seq.Add(1), trashExt))
	if l.fs.Rename(s.path, tp) != nil {
		return false
	}
	s.trash = tp
	return true
}

// deleteGradually shrinks the file at path step by step, then removes it;
// once Close has begun it removes the rest at once (Close waits for it, and
// a large purge would otherwise hold Close for seconds). Errors are not
// reported: the file is garbage either way, and Open removes what is left
// of it.
func (l *Log) deleteGradually(path string) {
	l.trash.deleteGradually(l.fs, path, l.closed.Load)
}

// deleteGradually deletes the file at path (see Log.deleteGradually),
// at once when closing reports true.
func (t *trashBin) deleteGradually(fsys FS, path string, closing func() bool) {
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		_ = fsys.Remove(path)
		return
	}
	size, err := f.Size()
	for err == nil && size > t.step && !closing() {
		size -= t.step
		if err = f.Truncate(size); err == nil {
			time.Sleep(t.pause)
		}
	}
	_ = f.Close()
	_ = fsys.Remove(path)
}
