package seglog

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Recycling segment files.
//
// A segment that TruncateFront drops is, when it is a plain file of the full
// SegmentSize and the log keeps fewer than maxSpares, renamed to a spare
// (spare-<n>.tmp) instead of unlinked. Once its map is released (at the next
// TruncateFront, when every truncated segment's map is: records read from it
// stay valid until then) it is offered to the next roll, which renames it to
// the new segment's name instead of creating and preallocating a file. Its
// old bytes are not cleared: they are old records, numbered below the new
// segment's first sequence number, which recovery never takes for the new
// segment's (scanSegment, cutTail), and torn writes over them are told from
// damage by the durable hint in each record header (record.go), not by
// zeros.
//
// Why recycle: unlinking a 64 MiB segment frees its blocks, which took
// 50-80 ms on an ext4 disk mounted with `discard`, and every fsync of the
// log queued behind the journal commit that carried the frees (p99.9 publish
// latency 80-90 ms at half load against 22-30 ms with no deletions). Why not
// clear: zeroing a spare (fallocate ZERO_RANGE, as the log did before
// records carried the hint) turns its blocks back into unwritten extents, and an fdatasync
// after writing into unwritten blocks also commits the extent conversion
// to the journal: 1.6-2.2x the cost of one into written blocks
// (BenchmarkFdatasyncAfterWrite), so group commits into a reused spare
// without zeroing are cheaper (ARCHITECTURE.md, "Decisions and what was
// measured").
// Spares are temp files: Open deletes leftovers (as it does every *.tmp),
// Close deletes the log's own.
const maxSpares = 2

const spareExt = ".spare" + tmpExt

// spareSet holds the log's spare files. reserved counts the renamed ones
// whose map is not released yet; ready lists those a roll may take.
type spareSet struct {
	mu       sync.Mutex
	reserved int
	ready    []string
	next     int
	all      map[string]bool // every spare file of this Log, for Close
}

// reserveSpare returns the path a truncated segment s should be renamed to
// instead of removed, or "" when it should be removed. Called with l.mu.
func (l *Log) reserveSpare(s *segment) string {
	if l.opts.NoRecycle || s.codec != CompressionNone || s.size != l.opts.SegmentSize || s.limit != l.opts.SegmentSize {
		return ""
	}
	sp := &l.spares
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.reserved+len(sp.ready) >= maxSpares {
		return ""
	}
	sp.reserved++
	sp.next++
	path := filepath.Join(l.dir, fmt.Sprintf("%d%s", sp.next, spareExt))
	if sp.all == nil {
		sp.all = map[string]bool{}
	}
	sp.all[path] = true
	return path
}

// unreserve gives up a reservation whose file is gone (or never made).
func (l *Log) unreserve(path string) {
	sp := &l.spares
	sp.mu.Lock()
	sp.reserved--
	delete(sp.all, path)
	sp.mu.Unlock()
}

// offerSpare offers a spare whose map is released to the next roll. Its
// bytes stay as they are: its old records are numbered below any segment
// it becomes, so no scan takes them for that segment's records (see
// record.go, scanSegment, cutTail).
func (l *Log) offerSpare(path string) {
	sp := &l.spares
	sp.mu.Lock()
	sp.reserved--
	sp.ready = append(sp.ready, path)
	sp.mu.Unlock()
}

// takeSpare returns a ready spare's path (and forgets it), or "".
func (l *Log) takeSpare() string {
	sp := &l.spares
	sp.mu.Lock()
	defer sp.mu.Unlock()
	n := len(sp.ready)
	if n == 0 {
		return ""
	}
	path := sp.ready[n-1]
	sp.ready = sp.ready[:n-1]
	delete(sp.all, path)
	return path
}

// removeSpares deletes every spare file of the log (Close, after the
// release goroutines finished).
func (l *Log) removeSpares() {
	sp := &l.spares
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for path := range sp.all {
		_ = l.fs.Remove(path)
	}
	sp.all, sp.ready, sp.reserved = nil, nil, 0
}

// newSegment starts the segment that follows a roll: a ready spare when
// there is one, else a new file.
func (l *Log) newSegment(first Seq) (*segment, error) {
	if path := l.takeSpare(); path != "" {
		s, err := reuseSegment(l.fs, l.dir, path, first, l.opts.SegmentSize, l.opts.writeViaMap)
		if err == nil {
			return s, nil
		}
		// The spare is gone (reuseSegment removed it); a new file will do.
	}
	return createSegment(l.fs, l.dir, first, initialAlloc, l.opts.SegmentSize, l.opts.writeViaMap)
}

// reuseSegment turns a ready spare (limit bytes long, old records in it) into
// the new empty segment first: rename, stamp, map. Like createSegment it
// syncs nothing: the directory entry is synced before the first record in
// it is reported durable (dirPending). On failure the spare is removed.
func reuseSegment(fsys FS, dir, spare string, first Seq, limit int64, writable bool) (*segment, error) {
	path := filepath.Join(dir, segName(first))
	if f, err := fsys.OpenFile(path, os.O_RDONLY, 0); err == nil {
		f.Close() // never rename over a file (createSegment uses O_EXCL)
		_ = fsys.Remove(spare)
		return nil, fmt.Errorf("%w: reuse segment file: %s exists", ErrWriteFailed, path)
	}
	if err := fsys.Rename(spare, path); err != nil {
		_ = fsys.Remove(spare)
		return nil, fmt.Errorf("%w: reuse segment file: %w", ErrWriteFailed, err)
	}
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		_ = fsys.Remove(path)
		return nil, fmt.Errorf("%w: reuse segment file: %w", ErrWriteFailed, err)
	}
	if size, err := f.Size(); err != nil || size != limit {
		return failSegment(fsys, f, path, "reuse segment file", fmt.Errorf("spare is %d bytes, want %d (%v)", size, limit, err))
	}
	return stampSegment(fsys, f, path, "reuse segment file", first, limit, limit, writable)
}
