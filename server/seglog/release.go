package seglog

import (
	"fmt"
	"sync"
)

// The end of a segment's life.
//
// A segment leaves the log (TruncateFront drops it, or the compressor
// replaces it) long before its file and map may go: records read from it
// are borrowed until the next TruncateFront, or with HoldSwapped until
// ReleaseSwapped (the graveyard, graveyard.go, keeps it meanwhile), and a
// Sync may be fsyncing its descriptor. The releaser closes descriptors
// under its lock, which Sync read-holds during its fsync, and unmaps and
// deletes on goroutines of its own, because freeing a big file's blocks
// stalled the caller for tens of milliseconds (see releaseLater). Close
// and Abandon wait for those goroutines.
type releaser struct {
	// mu is read-held by Sync during its fsync and write-held to close a
	// segment's descriptor, so a file is never closed under an fsync.
	mu  sync.RWMutex
	bg  sync.WaitGroup // release and directory-sync goroutines
	dir dirSyncer
}

// closeFile closes s's descriptor (a sealed segment: reads go through its
// map, which outlives the descriptor, so a large log does not hold one
// descriptor per segment). It waits out a Sync still fsyncing it.
func (r *releaser) closeFile(s *segment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.f != nil {
		_ = s.f.Close() // already fsynced; nothing is lost
		s.f = nil
	}
}

// later closes, unmaps and hands to then each of dead on a goroutine of
// its own. Nothing else may reference them: they left the log and what
// was read from them is no longer borrowed.
func (r *releaser) later(dead []*segment, then func(*segment)) {
	if len(dead) == 0 {
		return
	}
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		for _, s := range dead {
			// The descriptor is taken under mu (a Sync may still be
			// fsyncing it); closing and unmapping need no lock.
			r.mu.Lock()
			f := s.f
			s.f = nil
			r.mu.Unlock()
			if f != nil {
				_ = f.Close()
			}
			_ = s.release()
			then(s)
		}
	}()
}

// wait waits for every goroutine later and syncDirLater started.
func (r *releaser) wait() { r.bg.Wait() }

// syncDirLater runs sync (an fsync of the log's directory) on a goroutine
// of its own; calls made while one runs are folded into one more sync. A
// failure is kept for takeDirErr.
func (r *releaser) syncDirLater(sync func() error) {
	if !r.dir.kick() {
		return
	}
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		for r.dir.next() {
			r.dir.done(sync())
		}
	}()
}

// takeDirErr returns and clears the error of a failed syncDirLater.
func (r *releaser) takeDirErr() error { return r.dir.takeErr() }

// dirSyncer folds directory syncs asked for while one runs into one more.
type dirSyncer struct {
	mu      sync.Mutex
	dirty   bool  // asked for since the running sync began
	running bool  // a goroutine is syncing
	err     error // a failed sync, until taken
}

// kick asks for a sync; true: none runs, the caller starts the goroutine.
func (d *dirSyncer) kick() (start bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dirty = true
	if d.running {
		return false
	}
	d.running = true
	return true
}

// next reports whether the goroutine must sync again (and takes the
// request), or ends it.
func (d *dirSyncer) next() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.dirty {
		d.running = false
		return false
	}
	d.dirty = false
	return true
}

// done keeps the first failure until it is taken.
func (d *dirSyncer) done(err error) {
	if err == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil {
		d.err = fmt.Errorf("seglog: truncate front: sync directory: %w", err)
	}
}

// takeErr returns and clears the kept failure.
func (d *dirSyncer) takeErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.err
	d.err = nil
	return err
}

// syncDirLater makes the renames and removals of a TruncateFront durable
// with an fsync of the log's directory on a goroutine of its own (Close
// waits for it; calls made while one runs are folded into one more sync).
// Inline, that fsync stalled the caller (a partition's actor) and every
// Read and Append behind the log's lock for as long as the file system's
// journal took to commit: 0.2-0.5 ms usually, 12 ms and 1.4 s in one
// half-load run on a busy VM. Nothing waits for it: a deletion undone by a
// crash only brings back records the caller had dropped (it repeats the
// truncation), and a spare is not written into before the directory sync
// of the roll that reuses it, which covers the rename that made it one.
// A failure is returned by the next TruncateFront or Close.
func (l *Log) syncDirLater() {
	l.rel.syncDirLater(func() error { return l.fs.SyncDir(l.dir) })
}

// releaseLater unmaps truncated segments on a goroutine of its own (Close
// waits for it). Unmapping a large segment whose file is already unlinked
// frees its blocks, which took 50-80 ms on an ext4 disk mounted with
// `discard`: done inline, it stalled the caller (a partition's actor) and
// every Read and Append behind the log's lock. Nothing else references
// these segments: they left l.segs at the TruncateFront before this one,
// and what was read from them is invalid since then.
func (l *Log) releaseLater(dead []*segment) {
	l.rel.later(dead, func(s *segment) {
		if s.spare != "" {
			l.offerSpare(s.spare)
		}
		if s.trash != "" {
			l.deleteGradually(s.trash)
		}
	})
}
