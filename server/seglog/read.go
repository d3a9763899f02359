package seglog

import (
	"fmt"
	"path/filepath"
)

// Read returns record seq, its checksums verified. Meta and Data point into
// the segment's memory map: they stay valid until the next TruncateFront or
// Close; copy them to keep them longer, and never modify them. Read fails
// with ErrNotFound outside Bounds, ErrCorrupt for damaged bytes (including
// a range skipped with SkipCorrupt), ErrClosed after Close. Records past
// Durable are readable: check Durable before treating one as safe.
func (l *Log) Read(seq Seq) (rec Record, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed.Load() {
		return Record{}, ErrClosed
	}
	s, err := l.segmentFor(seq)
	if err != nil {
		return Record{}, err
	}
	src := s
	if s, err = l.view(s); err != nil {
		return Record{}, err
	}
	defer unguard(&err, s.path, guard())
	off, h, err := s.locate(seq)
	if err != nil {
		return Record{}, err
	}
	l.readForward(src, off)
	return recordAt(s.data, off, h), nil
}

// segmentFor returns the segment holding seq. Called with mu held.
func (l *Log) segmentFor(seq Seq) (*segment, error) {
	last := Seq(l.last.Load())
	if len(l.segs) == 0 || seq < l.segs[0].first || seq > last || seq == 0 {
		first := Seq(1)
		if len(l.segs) > 0 {
			first = l.segs[0].first
		}
		return nil, fmt.Errorf("%w: seq %d outside [%d, %d]", ErrNotFound, seq, first, last)
	}
	i := l.segs.find(seq)
	s := l.segs[i]
	if seq > s.last {
		// Only after a skipped damaged range can a gap fall between segments.
		return nil, &CorruptError{Path: s.path, Offset: s.end, Seq: seq, Reason: "record lost in a skipped damaged range"}
	}
	if s.inHole(seq) {
		return nil, &CorruptError{Path: s.path, Seq: seq, Reason: "record lost in a skipped damaged range"}
	}
	return s, nil
}

// Scan calls fn for each record from max(from, first) on, in order, until
// fn returns false, passing the next record would exceed maxBytes of Data
// (at least one record is always passed; maxBytes <= 0 means no limit), or
// the end of the log. Records lost in a range skipped with SkipCorrupt are
// passed over. fn runs without locks held, so it may call the log; the
// records it gets are borrowed as with Read. Scan returns the first error.
func (l *Log) Scan(from Seq, maxBytes int, fn func(Record) bool) error {
	var (
		cur     *segment // cursor: the next record is at cur/off if it is seq
		off     int64
		passed  int
		counted bool
	)
	seq := from
	for {
		rec, next, nextSeg, err := l.scanOne(&seq, cur, off)
		if err != nil {
			return err
		}
		if nextSeg == nil {
			return nil
		}
		cur, off = nextSeg, next
		if maxBytes > 0 && counted && passed+len(rec.Data) > maxBytes {
			return nil
		}
		passed += len(rec.Data)
		counted = true
		if !fn(rec) {
			return nil
		}
		seq = rec.Seq + 1
	}
}

// scanOne reads the first readable record at or after *seq (adjusting *seq),
// using cur/off as a hint. It returns a nil segment at the end of the log.
func (l *Log) scanOne(seq *Seq, cur *segment, off int64) (rec Record, next int64, s *segment, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed.Load() {
		return Record{}, 0, nil, ErrClosed
	}
	for {
		if len(l.segs) == 0 || *seq > Seq(l.last.Load()) {
			return Record{}, 0, nil, nil
		}
		if *seq < l.segs[0].first {
			*seq = l.segs[0].first
		}
		i := l.segs.find(*seq)
		s = l.segs[i]
		if *seq > s.last { // gap after a skipped range: go to the next segment
			if i+1 >= len(l.segs) {
				return Record{}, 0, nil, nil
			}
			*seq = l.segs[i+1].first
			continue
		}
		skipped := false
		for _, h := range s.holes {
			if *seq >= h.from && *seq <= h.to {
				*seq = h.to + 1
				skipped = true
			}
		}
		if !skipped {
			break
		}
	}
	v, err := l.view(s) // s itself unless compressed
	if err != nil {
		return Record{}, 0, nil, err
	}
	defer unguard(&err, s.path, guard())
	var h recHeader
	if s == cur && off < v.end {
		var st recStatus
		off = pastSide(v.data[:v.end], off)
		h, st = checkRecord(v.data[:v.end], off)
		if st != recOK || h.seq != *seq {
			off, h, err = v.locate(*seq)
		}
	} else {
		off, h, err = v.locate(*seq)
	}
	if err != nil {
		return Record{}, 0, nil, err
	}
	return recordAt(v.data, off, h), off + h.size(), s, nil
}

// TruncateFront deletes every whole segment whose records are all below
// seq; the active segment is always kept. Bounds reports what remains.
// Records read earlier from deleted segments become invalid.
func (l *Log) TruncateFront(seq Seq) error {
	// A segment being compressed is read through its map: wait for it.
	l.comp.mu.Lock()
	defer l.comp.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	l.releaseLater(l.grave.take(true))
	n := 0
	for n < len(l.segs)-1 && l.segs[n+1].first <= seq {
		n++
	}
	if n == 0 {
		return l.rel.takeDirErr()
	}
	// The new front is durable before any segment goes, so a segment
	// missing from the front at Open was deleted by someone else.
	if err := l.lockf.writeFront(frontHint{front: l.segs[n].first}, true); err != nil {
		return fmt.Errorf("seglog: truncate front: record the front in %s: %w", filepath.Join(l.dir, lockName), err)
	}
	var err error
	removed := 0
	// Oldest first, so a crash part-way leaves a contiguous log.
	for _, s := range l.segs[:n] {
		if sp := l.reserveSpare(s); sp != "" {
			if rerr := l.fs.Rename(s.path, sp); rerr == nil {
				s.spare = sp
			} else {
				l.unreserve(sp)
			}
		}
		// Not a spare: deleted gradually by the release goroutine, or now
		// if the rename to the trash fails.
		if s.spare != "" || l.toTrash(s) {
			// Renamed away: gone from the log like a removed file.
		} else if rerr := l.fs.Remove(s.path); rerr != nil {
			err = fmt.Errorf("seglog: truncate front: %w", rerr)
			break
		}
		_ = l.fs.Remove(idxPath(l.dir, s.first))
		_ = l.fs.Remove(plainMarkerPath(l.dir, s.first))
		l.cache.forget(s)
		removed++
	}
	l.grave.bury(l.segs[:removed]...)
	l.segs = append([]*segment(nil), l.segs[removed:]...)
	if removed > 0 {
		l.syncDirLater()
	}
	if derr := l.rel.takeDirErr(); err == nil {
		err = derr
	}
	return err
}

// SegmentInfo describes one segment file, for retention decisions (by
// bytes: sum Bytes; by age: Read the First record of the next segment).
type SegmentInfo struct {
	// First and Last are the sequence numbers it holds (Last == First-1
	// for an empty segment).
	First, Last Seq
	// Bytes is how much of the segment records use; Allocated is its size
	// on disk (preallocated so far: the active segment grows by doubling).
	Bytes, Allocated int64
	// Active is set for the segment appends go to.
	Active bool
	// Compressed: the segment is stored compressed (Options.Compression);
	// Allocated is then the compressed file's size.
	Compressed bool
}

// Segments lists the segments, oldest first. TruncateFront(s.Last+1)
// deletes every segment up to and including s (never the active one).
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.segs))
	for i, s := range l.segs {
		out[i] = SegmentInfo{First: s.first, Last: s.last, Bytes: s.end - segHeaderSize, Allocated: s.size, Active: i == len(l.segs)-1, Compressed: s.codec != CompressionNone}
	}
	return out
}
