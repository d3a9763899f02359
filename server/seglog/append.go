package seglog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// Append writes entries as one batch (one write per segment touched) and
// returns the first sequence number given. Under PolicySync it fsyncs
// before returning; under PolicyCaller and PolicyNone it returns after the
// write, and the records become durable with Sync (or, under PolicyNone,
// the background fsync).
//
// Errors: ErrEmptyBatch, ErrTooLarge (checked before anything is written),
// ErrClosed, ErrWriteFailed (a write or preallocation failed, e.g. a full
// disk: the log stays consistent and a later Append may succeed),
// ErrSyncFailed (sticky: see ErrSyncFailed). On error nothing of the batch
// is reported durable. A batch larger than a segment is written in several
// pieces; if a later piece fails the earlier ones stay in the log (they
// are not reported durable but may be read back after a reopen).
func (l *Log) Append(entries []Entry) (Seq, error) {
	return l.write(entries, l.opts.Policy == PolicySync, l.opts.Policy == PolicyNone)
}

// write validates and writes one batch, fsyncing it before it returns when
// syncNow is set. It returns the first sequence number given.
// behind (PolicyNone appends): count the bytes for the background fsync
// (writebehind.go).
func (l *Log) write(entries []Entry, syncNow, behind bool) (first Seq, err error) {
	if len(entries) == 0 {
		return 0, ErrEmptyBatch
	}
	var total int64
	for i := range entries {
		sz, err := l.checkEntry(&entries[i], i)
		if err != nil {
			return 0, err
		}
		total += sz
	}
	now := time.Now().UnixNano()

	l.w.lock()
	defer l.w.unlock()
	if err := l.beginWrite(); err != nil {
		return 0, err
	}
	first = Seq(l.last.Load()) + 1
	last, err := l.writeBatch(entries, first, now)
	if err != nil {
		return 0, err
	}
	if syncNow {
		if serr := l.syncSegment(l.w.act); serr != nil {
			return 0, l.dur.fail(serr)
		}
		l.setDurable(last, l.dur.sideWritten())
	}
	if behind && l.wb.add(total) && l.wb.due(l.Durable()) {
		go l.wb.run(l.syncBehind) // the method value is made only when one starts
	}
	return first, nil
}

// syncBehind is the background fsync of PolicyNone (writebehind.go).
func (l *Log) syncBehind() Seq {
	_, _ = l.Sync() // a failure is sticky: later appends report it
	return l.Durable()
}

// checkEntry returns the on-disk size of the record of e, the i-th entry
// of a batch (-1: a side record), or ErrTooLarge when it cannot be written.
func (l *Log) checkEntry(e *Entry, i int) (int64, error) {
	if l.opts.ReadOnly {
		return 0, ErrReadOnly
	}
	maxRec := l.opts.SegmentSize - segHeaderSize
	sz := recordSize(len(e.Meta), len(e.Data))
	if len(e.Meta) <= MaxMetaSize && sz <= maxRec && len(e.Data) <= 1<<32-1 {
		return sz, nil
	}
	what := "side record"
	if i >= 0 {
		what = fmt.Sprintf("entry %d", i)
	}
	if len(e.Meta) > MaxMetaSize {
		return 0, fmt.Errorf("%w: %s meta is %d bytes (max %d)", ErrTooLarge, what, len(e.Meta), MaxMetaSize)
	}
	return 0, fmt.Errorf("%w: %s needs %d bytes, a segment holds %d", ErrTooLarge, what, sz, maxRec)
}

// beginWrite makes the log ready for a write (called with w.mu held):
// not closed, no failed fsync, the clean-shutdown marker gone, a failed
// write's leftovers zeroed.
func (l *Log) beginWrite() error {
	if l.closed.Load() {
		return ErrClosed
	}
	if err := l.dur.err(); err != nil {
		return err
	}
	if l.w.markerLive {
		if err := l.dropMarker(); err != nil {
			return err
		}
	}
	if l.w.dirty > 0 {
		return l.zeroDirty()
	}
	return nil
}

// writeBatch encodes and writes entries starting at seq first, rolling to
// new segments as needed, and publishes them to readers. It returns the
// last sequence number written. Called with w.mu held.
func (l *Log) writeBatch(entries []Entry, first Seq, now int64) (Seq, error) {
	var total int64
	for i := range entries {
		total += recordSize(len(entries[i].Meta), len(entries[i].Data))
	}
	seq := first
	durable := l.Durable() // for the records' hints: only ever grows
	for len(entries) > 0 {
		act := l.w.act
		room := act.limit - act.end
		// Roll before writing anything when the whole batch would fit in a
		// fresh segment, so a failed roll (a full disk) leaves no part of
		// the batch behind.
		if total > room && act.last >= act.first && total <= l.opts.SegmentSize-segHeaderSize {
			if err := l.roll(); err != nil {
				return 0, err
			}
			continue
		}
		buf, offs := l.w.buf[:0], make([]int64, 0, len(entries))
		n := 0
		for ; n < len(entries); n++ {
			e := &entries[n]
			sz := recordSize(len(e.Meta), len(e.Data))
			if int64(len(buf))+sz > room {
				break
			}
			ts := e.Time
			if ts == 0 {
				ts = now
			}
			offs = append(offs, act.end+int64(len(buf)))
			buf = appendRecord(buf, seq+Seq(n), durable, ts, e.Meta, e.Data, e.CRC)
		}
		l.w.buf = buf
		if n == 0 {
			if err := l.roll(); err != nil {
				return 0, err
			}
			continue
		}
		// Preallocate before writing: a full disk is an error here, not a
		// SIGBUS later, and nothing of the batch has been written.
		if err := l.grow(act, act.end+int64(len(buf))); err != nil {
			return 0, err
		}
		if err := l.writeAt(act, buf, act.end); err != nil {
			l.w.dirty = int64(len(buf))
			return 0, fmt.Errorf("%w: %s at %d: %w", ErrWriteFailed, act.path, act.end, err)
		}
		l.mu.Lock()
		for i, off := range offs {
			act.addIndex(seq+Seq(i), off, l.opts.IndexInterval, false)
		}
		act.end += int64(len(buf))
		act.last = seq + Seq(n) - 1
		l.last.Store(uint64(act.last))
		l.mu.Unlock()
		l.w.trimBuf()
		seq += Seq(n)
		total -= int64(len(buf))
		entries = entries[n:]
	}
	return seq - 1, nil
}

// writeAt writes b at off in s, through the map or with pwrite.
func (l *Log) writeAt(s *segment, b []byte, off int64) (err error) {
	if l.opts.writeViaMap {
		defer unguard(&err, s.path, guard())
		copy(s.data[off:], b)
		return nil
	}
	_, err = s.f.WriteAt(b, off)
	return err
}

// zeroDirty clears what a failed write may have left past the active end,
// so no stale bytes can ever look like records, and syncs the zeros before
// anything is written over them: otherwise a crash could bring back the
// failed write's bytes in one disk page and the new records in the next,
// which recovery would have to call corruption. Called with w.mu held.
func (l *Log) zeroDirty() error {
	act := l.w.act
	n := min(l.w.dirty, act.size-act.end)
	if n > 0 {
		if err := l.writeAt(act, make([]byte, n), act.end); err != nil {
			return fmt.Errorf("%w: clearing a failed write in %s: %w", ErrWriteFailed, act.path, err)
		}
		if err := act.f.Sync(); err != nil {
			return l.dur.fail(err)
		}
	}
	l.w.dirty = 0
	return nil
}

// roll seals the active segment (fsync, then its index file) and starts a
// new one. Called with w.mu held. On failure the active segment stays.
func (l *Log) roll() error {
	old := l.w.act
	if err := l.syncSegment(old); err != nil {
		return l.dur.fail(err)
	}
	l.setDurable(old.last, l.dur.sideWritten()) // side records are never written past a roll
	// Best effort: a missing index only costs a scan at the next Open.
	_ = writeFileAtomic(l.fs, l.dir, filepath.Base(idxPath(l.dir, old.first)), encodeIndex(old), false)
	ns, err := l.newSegment(old.last + 1)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.segs = append(l.segs, ns)
	l.w.act = ns
	l.mu.Unlock()
	l.rel.closeFile(old)
	l.kickCompressor()
	return nil
}

// grow preallocates and maps the active segment s up to at least need
// bytes (need <= s.limit), doubling its allocation so a segment that fills
// grows a handful of times; when the disk has no room for the doubled
// size, it takes need alone. Called with w.mu held. On failure (a full
// disk) the segment is as it was and ErrWriteFailed is returned.
func (l *Log) grow(s *segment, need int64) error {
	if need <= s.size {
		return nil
	}
	size := max(s.size, 1)
	for size < need {
		size *= 2
	}
	size = min(size, s.limit)
	if err := s.f.Allocate(s.size, size-s.size); err != nil {
		// A full disk may still hold what this append needs: take just
		// that (whole pages), so writing resumes as soon as any room is
		// free instead of waiting for room for the doubled size.
		exact := min(pageRound(need), s.limit)
		if exact >= size || s.f.Allocate(s.size, exact-s.size) != nil {
			return fmt.Errorf("%w: preallocate %s to %d bytes: %w", ErrWriteFailed, s.path, size, err)
		}
		size = exact
	}
	if err := s.mapWindow(s.size, size); err != nil {
		return fmt.Errorf("%w: %w", ErrWriteFailed, err)
	}
	l.mu.Lock()
	s.size, s.data = size, s.data[:size]
	l.mu.Unlock()
	return nil
}

// Sync makes every record written before the call durable, side records
// too, and returns the durable point: one fsync of the active segment (the
// sealed ones were synced at their roll), none when everything written is
// durable already. It runs beside Append: the fsync holds no lock an
// appender takes, so the next batch is written while this one syncs.
// Concurrent Syncs each fsync; the log shares nothing between them (the
// caller that wants fewer fsyncs calls it less often). After a failed
// fsync it returns ErrSyncFailed, always.
func (l *Log) Sync() (Seq, error) {
	if l.closed.Load() {
		return 0, ErrClosed
	}
	if l.opts.ReadOnly {
		return l.Durable(), nil // nothing was written
	}
	if err := l.dur.err(); err != nil {
		return l.Durable(), err
	}
	side := l.dur.sideWritten() // before last: a side record is published before the records after it
	if l.dur.covers(Seq(l.last.Load()), side) {
		return l.Durable(), nil
	}
	// Let an append already on its way finish its write so this fsync
	// covers it too (bounded: a steady stream must not hold the fsync
	// back). It spares the caller an fsync: a writer that syncs behind
	// itself (the broker's commit) is often mid-write when it asks.
	for i := 0; i < 8 && l.w.busy(); i++ {
		runtime.Gosched()
	}
	upto, sideUpto, err := l.syncActive()
	switch {
	case errors.Is(err, ErrClosed):
		return l.Durable(), err
	case err != nil && l.closed.Load():
		return l.Durable(), ErrClosed // Close reports its own sync's outcome
	case err != nil:
		return l.Durable(), l.dur.fail(err)
	}
	l.setDurable(upto, sideUpto)
	return l.Durable(), nil
}

// syncActive fsyncs the active segment and returns the last sequence number
// and side mark it covers (ErrClosed once the log is closed). Records in
// older segments were synced when they were sealed.
// It holds rel.mu (not mu) during the fsync: that keeps the file from being
// closed meanwhile without stopping appenders from publishing records.
func (l *Log) syncActive() (Seq, uint64, error) {
	l.mu.RLock()
	if l.closed.Load() {
		l.mu.RUnlock()
		return 0, 0, ErrClosed
	}
	act := l.segs.active()
	upto, side := act.last, l.dur.sideWritten()
	l.rel.mu.RLock()
	l.mu.RUnlock()
	defer l.rel.mu.RUnlock()
	if err := l.syncSegment(act); err != nil {
		return 0, 0, err
	}
	return upto, side, nil
}

// syncSegment makes s's records durable: fdatasync, and the first time
// after s was created (or the log opened), an fsync of the directory and
// of its parent so the file itself survives a crash. Those directory
// syncs are deferred to here so that opening or creating a log costs no
// fsync; Open sets them pending for the active segment, whose creator may
// have died before syncing them. Concurrent callers may both sync the
// directory; that is harmless.
func (l *Log) syncSegment(s *segment) error {
	if l.dur.parentPending.Load() {
		// A parent the process may not open for reading (permission
		// denied) cannot be synced at all; that is not an I/O failure.
		if err := l.fs.SyncDir(filepath.Dir(l.dir)); err != nil && !errors.Is(err, os.ErrPermission) {
			return err
		}
		l.dur.parentPending.Store(false)
	}
	if s.dirPending.Load() {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return err
		}
		s.dirPending.Store(false)
	}
	return s.f.Sync()
}

// dropMarker removes the clean-shutdown marker, durably, before the first
// write after a clean Open: a marker left behind by a crash after that
// write would hide the new tail from the next Open's scan. Called with
// w.mu held.
func (l *Log) dropMarker() error {
	if err := l.fs.Remove(filepath.Join(l.dir, cleanName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: remove clean marker: %w", ErrWriteFailed, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("%w: remove clean marker: %w", ErrWriteFailed, err)
	}
	l.w.act.dirPending.Store(false) // that sync covered its entry too
	l.w.markerLive = false
	return nil
}

// pageRound rounds n up to a whole number of memory pages.
func pageRound(n int64) int64 {
	pg := int64(os.Getpagesize())
	return (n + pg - 1) &^ (pg - 1)
}
