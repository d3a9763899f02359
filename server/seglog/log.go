package seglog

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// Log is the file-backed Store: a directory of preallocated, memory-mapped
// segment files. Create it with Open.
//
// It is built from owned parts, each a small type with its fields, the
// methods that touch only them and its tests beside it: the segment list
// (seglist.go); the one writer (writer.go) and PolicyNone's background
// fsync (writebehind.go); what is known durable and the sticky fsync error
// (durability.go); the LOCK file and its hints (lockfile.go); segments
// that left the log but stay mapped (graveyard.go) and their release
// (release.go); the read cursors (readcursor.go); the compressor and the
// cache of decompressed segments (compress.go); spare and trash files
// (recycle.go, trash.go). A segment is built the same way (segment.go).
// The methods on Log are the glue that needs more than one part.
//
// Locks, in this order: w.mu (the one writer; guards the active segment's
// write position and the encode buffer) or comp.mu (one segment
// compressed at a time; TruncateFront waits for it), never both; then mu
// (the segment list, the graveyard and each segment's end/last/index,
// read-locked by readers); then rel.mu (read-held by Sync during its
// fsync, write-held to close segment files, so a file is never closed
// under an fsync). The durable points and the sticky fsync error are
// atomics, under no lock. Leaf locks, taken last and holding nothing
// else: fwd.mu (the read cursors), each segment's hint.mu, cache.mu,
// spares.mu, rel.dir.mu, lockf.hint.mu, comp.errMu.
type Log struct {
	dir   string
	opts  Options
	fs    FS
	lockf lockFile // LOCK: the flock and the hints kept in it (lockfile.go)

	w  writer      // the one writer and what it owns (writer.go)
	wb writeBehind // PolicyNone's background fsync (writebehind.go)

	mu     sync.RWMutex
	segs   segList       // ascending by first; the last one is active (seglist.go)
	closed atomic.Bool   // set under mu
	last   atomic.Uint64 // last written sequence number (published under mu)
	grave  graveyard     // left the log, still mapped (graveyard.go; under mu)
	rel    releaser      // closes, unmaps and deletes what left (release.go)
	fwd    cursorSet     // where readers are, for readForward (readcursor.go)
	dur    durability    // the durable points and the sticky fsync error (durability.go)

	rec Recovery

	comp   compressor // background compression of sealed segments
	cache  segCache   // decompressed segments, for reads
	spares spareSet   // segment files kept for reuse (recycle.go)
	trash  trashBin   // truncated files deleted gradually (trash.go)
}

var _ Store = (*Log)(nil)

// Recovery reports what Open found and did.
type Recovery struct {
	// Clean: the previous Close was clean, so the tail scan was skipped.
	Clean bool
	// Segments is the number of segment files opened.
	Segments int
	// ScannedBytes is how many record bytes were read and verified.
	ScannedBytes int64
	// RebuiltIndexes counts sealed segments whose index had to be rebuilt.
	RebuiltIndexes int
	// TruncatedPath, TruncatedAt and TruncatedBytes describe the torn tail
	// that was cut (TruncatedBytes == 0: nothing was cut). TruncatedBytes
	// counts the bytes zeroed: the torn record's header sectors and every
	// record numbered after the recovered ones (see cutTail).
	TruncatedPath  string
	TruncatedAt    int64
	TruncatedBytes int64
	// Skipped lists damaged ranges passed over because of SkipCorrupt.
	Skipped []SkippedRange
	// BadIndexes counts index files that were present but damaged or
	// stale, of any segment (RebuiltIndexes counts the sealed segments
	// scanned for want of a usable index, missing ones included).
	BadIndexes int
	// BadMarker: a clean-shutdown marker was present but damaged.
	BadMarker bool
	// BadLock: the LOCK file's hints were missing or damaged (ReadOnly
	// opens only: a writable Open recreates them).
	BadLock bool
	// DurableHint is the durable point the previous session recorded
	// (durablehint.go; 0: none): records up to it had been fsynced, so
	// damage to them is corruption, never a torn tail.
	DurableHint Seq
}

// SkippedRange is a damaged range that Open skipped with SkipCorrupt.
type SkippedRange struct {
	Path           string
	Offset, Length int64
	// From and To are the sequence numbers lost (inclusive); From > To when
	// the range held no whole record.
	From, To Seq
	// Recorded: an earlier Open skipped this range (with SkipCorrupt) and
	// recorded it in the sealed segment's index; this Open took the
	// segment as recovered then, without needing SkipCorrupt.
	Recorded bool
}

// Open opens (creating if needed) the log in dir, recovering from a crash
// if the last shutdown was not clean: a torn tail is cut (and reported in
// Recovery), a damaged record before the tail makes Open fail with a
// *CorruptError unless opts.SkipCorrupt is set. It fails with ErrLocked if
// another Log holds the directory.
func Open(dir string, opts Options) (*Log, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir, opts: o, fs: o.FS, trash: trashBin{step: deleteStep, pause: deletePause}}
	l.grave.hold = o.HoldSwapped
	if o.ReadOnly {
		return openReadOnly(l)
	}
	if err := l.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("seglog: open %s: %w", dir, err)
	}
	hint, err := l.lockf.open(l.fs, dir)
	if err != nil {
		return nil, err
	}
	l.rec.DurableHint = hint
	if err := l.recover(); err != nil {
		l.releaseAll()
		return nil, err
	}
	if l.opts.Verify {
		l.lockf.writeVerified(l.segs.active().first)
	}
	l.startCompressor()
	return l, nil
}

// Recovery returns what Open found and did.
func (l *Log) Recovery() Recovery { return l.rec }

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// Durable returns the highest sequence number known to be on disk.
func (l *Log) Durable() Seq { return l.dur.durable() }

// Bounds returns the first retained and the last written sequence numbers.
// Records past Durable are readable but not yet on disk.
func (l *Log) Bounds() (first, last Seq) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segs) == 0 {
		return 1, 0
	}
	return l.segs[0].first, Seq(l.last.Load())
}

// Close syncs, records a clean shutdown, unmaps and closes every file and
// releases the directory lock. A second Close returns nil. If the final
// sync fails the error is returned and no clean marker is written, so the
// next Open scans and recovers. Closing a log that was opened clean and
// not written to since costs no I/O (its marker still holds); otherwise
// Close fsyncs the active segment only if records are not yet durable, and
// writes the marker and index without fsync: both are checksummed hints,
// and losing them to a power cut costs the next Open a scan, not data.
func (l *Log) Close() error {
	err := l.close()
	l.wb.wait() // a write-behind fsync blocked on mu ends once close let go
	return err
}

func (l *Log) close() error {
	l.stopCompressor() // before the locks: it takes mu to swap a segment
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return nil
	}
	l.closed.Store(true)
	if l.opts.ReadOnly {
		return l.releaseAll()
	}
	var err error
	failed := l.dur.err() != nil
	if failed {
		err = l.dur.err()
	} else if l.w.dirty > 0 {
		err = l.zeroDirty()
	}
	if act := l.segs.active(); err == nil && !failed && act != nil && !l.w.markerLive {
		var serr error
		if !l.dur.covers(act.last, l.dur.sideWritten()) {
			serr = l.syncSegment(act)
		}
		if serr != nil {
			err = fmt.Errorf("%w: close: %w", ErrSyncFailed, serr)
		} else {
			l.setDurable(act.last, l.dur.sideWritten())
			// The index and marker spare the next Open its scan; losing
			// them costs only that scan, so their errors are not fatal.
			// They need no fsync: their checksums reject a torn file, and
			// they only describe bytes that are already durable.
			if writeFileAtomic(l.fs, l.dir, filepath.Base(idxPath(l.dir, act.first)), encodeIndex(act), false) == nil {
				_ = writeFileAtomic(l.fs, l.dir, cleanName, encodeClean(cleanMarker{segFirst: act.first, last: act.last, end: act.end}), false)
			}
		}
	}
	trash := l.grave.trash() // truncated since the last release pass
	if rerr := l.releaseAll(); err == nil {
		err = rerr
	}
	if derr := l.rel.takeDirErr(); err == nil {
		err = derr
	}
	l.removeSpares()
	for _, path := range trash {
		_ = l.fs.Remove(path)
	}
	return err
}

// Abandon is for crash tests: it drops every file, map and the lock
// without syncing or writing the clean-shutdown marker, as if the process
// had died here, so the next Open recovers. Written bytes stay in the page
// cache (pair it with internal/crashfs's Crash to lose the un-synced ones). Any later
// call fails with ErrClosed.
func (l *Log) Abandon() {
	l.abandon()
	l.wb.wait()
}

func (l *Log) abandon() {
	l.stopCompressor()
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed.Store(true)
	l.releaseAll()
}

// releaseAll unmaps and closes all segments and drops the lock.
func (l *Log) releaseAll() error {
	l.rel.wait() // before rel.mu, which releaseLater takes
	l.rel.mu.Lock()
	defer l.rel.mu.Unlock()
	var err error
	for _, s := range append(l.grave.segs, l.segs...) {
		if rerr := s.release(); err == nil && rerr != nil {
			err = rerr
		}
	}
	l.segs, l.grave.segs = nil, nil
	l.cache.close()
	l.lockf.release()
	return err
}

// setDurable raises the durable point to seq, noting it in the LOCK
// file's hint when it rose, and the durable side mark to side.
func (l *Log) setDurable(seq Seq, side uint64) {
	if l.dur.raise(seq) {
		l.lockf.hint.note(seq)
	}
	l.dur.raiseSide(side)
}
