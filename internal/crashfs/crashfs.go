// Package crashfs is a test tool: an in-process vfs.FS (the file-system
// contract of seglog) that passes everything to an inner file system but
// remembers every write not yet made durable by Sync, so that Crash can
// simulate a power cut at any byte, and that injects failing writes, syncs
// and preallocations. seglog's and the broker's crash tests pass it as
// seglog.Options.FS.
//
// It is not internal/faultfs: that one is a FUSE file system mounted for
// whole-process durability runs (cmd/fibril-faultfs); this one wraps the
// file calls of one Log inside a test binary and needs no root.
//
// # Caveats
//
//   - Directory operations (create, remove, rename) count as durable at
//     once: a Crash never brings back a removed file or undoes a rename.
//   - Crash rewrites the files through the operating system, so the inner
//     file system's paths must be real ones.
package crashfs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"

	"github.com/fibrilmq/fibril/server/seglog/vfs"
)

// FS is a file system for tests: it passes everything to an inner one
// (normally seglog.OSFS) but remembers every write not yet made durable by Sync,
// so that Crash can simulate a power cut at any byte, and it injects
// failing writes, syncs and preallocations. Directory operations (create,
// remove, rename) count as durable at once. Safe for concurrent use.
type FS struct {
	inner   vfs.FS
	mu      sync.Mutex
	pending []*pendingWrite // un-synced writes, oldest first, all files
	// Injected faults; nil means none.
	writeErr    error
	writeBudget int64 // bytes that may still be written before writeErr hits
	syncErr     error
	allocErr    error
	// Successful Sync and SyncDir calls, for tests that count fsyncs.
	fileSyncs, dirSyncs int
}

// pendingWrite is a write the disk may not have yet.
type pendingWrite struct {
	path string
	off  int64
	old  []byte // the bytes it replaced (zeros past the old end of file)
	new  []byte
	// lost: a Sync of the file failed after this write. Like Linux after a
	// failed fsync, a later Sync does not save it, and Crash always drops it.
	lost bool
}

var _ vfs.FS = (*FS)(nil)

// New returns an FS over inner with no faults armed.
func New(inner vfs.FS) *FS { return &FS{inner: inner} }

// FailWrites makes writes fail with err once budget more bytes have been
// written; the write that crosses the budget writes only its first part
// (a short write). A nil err disarms.
func (f *FS) FailWrites(err error, budget int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writeErr, f.writeBudget = err, budget
}

// FailSyncs makes every Sync fail with err until disarmed with nil. As on
// Linux after a failed fsync, the writes it should have saved stay
// un-synced: a later Crash may drop them even if a later Sync succeeds.
func (f *FS) FailSyncs(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncErr = err
}

// FailAllocate makes preallocation fail with err (a full disk: use
// syscall.ENOSPC) until disarmed with nil.
func (f *FS) FailAllocate(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allocErr = err
}

// SyncCounts returns how many file syncs (Sync) and directory syncs
// (SyncDir) have succeeded so far.
func (f *FS) SyncCounts() (files, dirs int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fileSyncs, f.dirSyncs
}

// Unsynced returns how many bytes are written but not yet synced, leaving
// out files whose base name is except (seglog's LOCK file: its
// durable-point hint is never synced, by design).
func (f *FS) Unsynced(except string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for _, w := range f.pending {
		if filepath.Base(w.path) != except {
			n += int64(len(w.new))
		}
	}
	return n
}

// CrashMode says which un-synced writes survive a simulated crash.
type CrashMode uint8

const (
	// CrashCut keeps the un-synced writes, in the order they were made, up
	// to a random byte and drops the rest: a crash at any byte, tearing the
	// write it falls in.
	CrashCut CrashMode = iota
	// CrashSectors keeps each 512-byte sector of each un-synced write with
	// probability 1/2: the disk wrote back pages in any order.
	CrashSectors
	// CrashDropAll drops every un-synced write.
	CrashDropAll
)

// Crash simulates a power cut: it undoes un-synced writes as mode says and
// returns how many un-synced bytes were lost. rng picks the cut (it may be
// nil for CrashDropAll). Drop the log with seglog.Log.Abandon first and reopen it
// afterwards.
func (f *FS) Crash(rng *rand.Rand, mode CrashMode) (lost int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var total int64
	for _, w := range f.pending {
		total += int64(len(w.new))
	}
	keep := int64(0) // CrashCut: bytes of the stream that survive
	if mode == CrashCut && total > 0 {
		keep = rng.Int64N(total + 1)
	}
	type span struct{ from, to int64 } // byte range of a write to undo
	var pos int64
	undo := make([][]span, len(f.pending))
	for i, w := range f.pending {
		n := int64(len(w.new))
		switch {
		case w.lost:
			undo[i] = []span{{0, n}}
		case mode == CrashCut:
			if pos+n > keep {
				undo[i] = []span{{max(keep-pos, 0), n}}
			}
		case mode == CrashSectors:
			for s := int64(0); s < n; {
				next := min(((w.off+s)/512+1)*512-w.off, n)
				if rng.IntN(2) == 0 {
					undo[i] = append(undo[i], span{s, next})
				}
				s = next
			}
		default:
			undo[i] = []span{{0, n}}
		}
		pos += n
	}
	// Undo newest first so each range returns to what preceded all writes.
	for i := len(f.pending) - 1; i >= 0; i-- {
		w := f.pending[i]
		if len(undo[i]) == 0 {
			continue
		}
		file, oerr := os.OpenFile(w.path, os.O_RDWR, 0)
		if errors.Is(oerr, os.ErrNotExist) {
			continue // removed since: nothing to undo
		}
		if oerr != nil {
			return lost, oerr
		}
		for _, sp := range undo[i] {
			if _, werr := file.WriteAt(w.old[sp.from:sp.to], w.off+sp.from); werr != nil {
				err = werr
			}
			lost += sp.to - sp.from
		}
		if cerr := file.Close(); err == nil {
			err = cerr
		}
	}
	f.pending = nil
	return lost, err
}

// OpenFile opens a file whose writes are tracked.
func (f *FS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	inner, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{fs: f, path: name, inner: inner}, nil
}

// Remove removes a file (and forgets its un-synced writes).
func (f *FS) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	kept := f.pending[:0]
	for _, w := range f.pending {
		if w.path != name {
			kept = append(kept, w)
		}
	}
	clear(f.pending[len(kept):])
	f.pending = kept
	return f.inner.Remove(name)
}

// Rename renames a file.
func (f *FS) Rename(oldpath, newpath string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.pending {
		if w.path == oldpath {
			w.path = newpath
		}
	}
	return f.inner.Rename(oldpath, newpath)
}

// ReadDir lists dir.
func (f *FS) ReadDir(dir string) ([]string, error) { return f.inner.ReadDir(dir) }

// MkdirAll creates dir.
func (f *FS) MkdirAll(dir string, perm os.FileMode) error { return f.inner.MkdirAll(dir, perm) }

// SyncDir syncs dir (or fails like Sync when syncs are failing).
func (f *FS) SyncDir(dir string) error {
	f.mu.Lock()
	serr := f.syncErr
	f.mu.Unlock()
	if serr != nil {
		return fmt.Errorf("sync %s: %w", dir, serr)
	}
	if err := f.inner.SyncDir(dir); err != nil {
		return err
	}
	f.mu.Lock()
	f.dirSyncs++
	f.mu.Unlock()
	return nil
}

// faultFile is an open file of an FS.
type faultFile struct {
	fs    *FS
	path  string
	inner vfs.File
}

func (ff *faultFile) ReadAt(p []byte, off int64) (int, error) { return ff.inner.ReadAt(p, off) }
func (ff *faultFile) Truncate(size int64) error               { return ff.inner.Truncate(size) }
func (ff *faultFile) Size() (int64, error)                    { return ff.inner.Size() }
func (ff *faultFile) Fd() uintptr                             { return ff.inner.Fd() }
func (ff *faultFile) Close() error                            { return ff.inner.Close() }

func (ff *faultFile) WriteAt(p []byte, off int64) (int, error) {
	f := ff.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	var werr error
	if f.writeErr != nil {
		if int64(len(p)) > f.writeBudget {
			p, werr = p[:max(f.writeBudget, 0)], f.writeErr
		}
		f.writeBudget -= int64(len(p))
	}
	old := make([]byte, len(p))
	if n, err := ff.inner.ReadAt(old, off); err != nil && n < len(old) {
		clear(old[n:]) // past the end of file: the old content is "nothing"
	}
	n, err := ff.inner.WriteAt(p, off)
	if n > 0 {
		f.pending = append(f.pending, &pendingWrite{path: ff.path, off: off, old: old[:n], new: append([]byte(nil), p[:n]...)})
	}
	if err == nil {
		err = werr
	}
	return n, err
}

func (ff *faultFile) Sync() error {
	f := ff.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.syncErr != nil {
		for _, w := range f.pending {
			if w.path == ff.path {
				w.lost = true
			}
		}
		return fmt.Errorf("fdatasync %s: %w", ff.path, f.syncErr)
	}
	if err := ff.inner.Sync(); err != nil {
		return err
	}
	f.fileSyncs++
	kept := f.pending[:0]
	for _, w := range f.pending {
		if w.path != ff.path || w.lost {
			kept = append(kept, w)
		}
	}
	clear(f.pending[len(kept):])
	f.pending = kept
	return nil
}

func (ff *faultFile) Allocate(off, size int64) error {
	f := ff.fs
	f.mu.Lock()
	aerr := f.allocErr
	f.mu.Unlock()
	if aerr != nil {
		return fmt.Errorf("fallocate %s: %w", ff.path, aerr)
	}
	return ff.inner.Allocate(off, size)
}
