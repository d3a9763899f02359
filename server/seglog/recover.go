package seglog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// recover opens every segment in the directory and rebuilds the log's state
// from what is on disk (the only source of truth): sealed segments from
// their index files (scanned when the index is missing or damaged), the
// last segment from the clean-shutdown marker or by scanning its tail.
func (l *Log) recover() (err error) {
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("seglog: open %s: %w", l.dir, err)
	}
	var firsts []Seq
	plain := map[Seq]bool{}
	comp := map[Seq]Compression{}
	noComp := map[Seq]bool{}
	for _, name := range names {
		if strings.HasSuffix(name, tmpExt) {
			if !l.opts.ReadOnly {
				_ = l.fs.Remove(filepath.Join(l.dir, name)) // an interrupted atomic write
			}
			continue
		}
		if first, ok := parseSegName(name); ok {
			firsts = append(firsts, first)
			plain[first] = true
		}
		if first, c, ok := parseCompName(name); ok {
			comp[first] = c
		}
		if base, ok := strings.CutSuffix(name, plainExt); ok {
			if first, ok := parseSegName(base); ok {
				noComp[first] = true
			}
		}
	}
	for first, c := range comp {
		if plain[first] {
			// A compression was cut short after its rename: the plain
			// segment (sealed, fsynced) wins; the copy is redone later.
			if l.opts.ReadOnly {
				continue
			}
			if err := l.fs.Remove(compPath(l.dir, first, c)); err != nil {
				return fmt.Errorf("seglog: remove superseded compressed segment: %w", err)
			}
			continue
		}
		firsts = append(firsts, first)
	}
	sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
	cleanBytes, err := readFile(l.fs, filepath.Join(l.dir, cleanName))
	if err != nil {
		return fmt.Errorf("seglog: read clean marker: %w", err)
	}
	marker, hasMarker := decodeClean(cleanBytes)
	l.rec.BadMarker = cleanBytes != nil && !hasMarker

	for i, first := range firsts {
		isLast := i == len(firsts)-1
		var s *segment
		if c, ok := comp[first]; ok && !plain[first] {
			s, err = l.openCompressed(first, c)
			if err == nil && l.verifies(s, false) {
				err = l.verifyCompressed(s)
			}
		} else {
			s, err = l.openSegment(first, isLast, marker, hasMarker)
		}
		if err != nil {
			return err
		}
		if s != nil {
			s.noComp = noComp[first]
			l.segs = append(l.segs, s)
		}
	}
	if err := l.checkContinuity(); err != nil {
		return err
	}
	if err := l.checkFront(); err != nil {
		return err
	}
	if l.opts.ReadOnly {
		return l.endReadOnly(firsts)
	}
	if len(l.segs) > 0 {
		l.writeRebuiltIndexes()
	}
	if n := len(l.segs); n > 0 && l.segs[n-1].codec != CompressionNone {
		// Only sealed segments are compressed: the active one after it
		// was lost (its creation never reached the disk). Start it again.
		s, err := createSegment(l.fs, l.dir, l.segs[n-1].last+1, firstAlloc, l.opts.SegmentSize, l.opts.writeViaMap)
		if err != nil {
			return fmt.Errorf("seglog: open: %w", err)
		}
		l.segs = append(l.segs, s)
	}
	if len(l.segs) == 0 {
		// Sequence numbers never go back: a log whose every segment was
		// truncated away, and whose last one's creation never reached the
		// disk, goes on from that segment's first number (its name), not
		// from 1. Starting over would hand out numbers a reader of the log
		// (a consumer group's frontier) already counts as consumed.
		start := max(1, l.opts.Start)
		if len(firsts) > 0 {
			start = firsts[len(firsts)-1]
		}
		s, err := createSegment(l.fs, l.dir, start, firstAlloc, l.opts.SegmentSize, l.opts.writeViaMap)
		if err != nil {
			return fmt.Errorf("seglog: open: %w", err)
		}
		l.segs = append(l.segs, s)
		if l.lockf.front.front == 0 {
			// A new log knows its front from the start (unsynced: lost,
			// it is unknown, as in a log of an earlier version).
			if err := l.lockf.writeFront(frontHint{front: start}, false); err != nil {
				return fmt.Errorf("seglog: open: %w", err)
			}
		}
	}
	for _, s := range l.segs.sealed() {
		l.rel.closeFile(s)
	}
	act := l.segs.active()
	if act.last < l.rec.DurableHint {
		// Records the log had made durable are gone from its end (its
		// last segment file lost, a sealed segment cut short with none
		// after it): corruption, never a torn tail. With SkipCorrupt they
		// become a hole that reads as corrupt, and numbering goes on
		// after them.
		cerr := &CorruptError{Path: act.path, Offset: act.end, Seq: act.last + 1,
			Reason: fmt.Sprintf("the log ends at %d, but it had made every record up to %d durable", act.last, l.rec.DurableHint)}
		if !l.opts.SkipCorrupt {
			return cerr
		}
		l.skipRange(act, SkippedRange{Path: act.path, Offset: act.end, From: act.last + 1, To: l.rec.DurableHint})
		act.last = l.rec.DurableHint
	}
	// Whether the entries of the active segment and of the log directory
	// ever reached the disk is unknown (the session that created them may
	// have died before its first sync): the first sync that reports a
	// record durable makes them durable (see syncSegment), once per Open.
	act.dirPending.Store(true)
	l.dur.parentPending.Store(true)
	if !l.rec.Clean && act.last >= act.first {
		// What the scan found may sit only in the page cache (the previous
		// process died, the machine did not): put it on disk before
		// calling it durable. An empty segment has nothing to sync.
		if err := l.syncSegment(act); err != nil {
			return fmt.Errorf("%w: open: %w", ErrSyncFailed, err)
		}
	}
	l.w.act = act
	l.last.Store(uint64(act.last))
	l.dur.raise(act.last)
	l.lockf.hint.note(act.last)
	l.rec.Segments = len(l.segs)
	// The marker must be gone, durably, before the first append (see
	// dropMarker): otherwise a crash could leave a marker that hides a torn
	// tail from the next Open. Until then it is true, so it stays: a log
	// opened and closed without a write costs no fsync. A marker that did
	// not vouch for the last segment (rare: its index was lost) is removed
	// now, durably, as it always was.
	if l.rec.Clean {
		l.w.markerLive = true
	} else if cleanBytes != nil {
		if err := l.fs.Remove(filepath.Join(l.dir, cleanName)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("seglog: remove clean marker: %w", err)
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("seglog: open: %w", err)
		}
	}
	return nil
}

// openSegment opens and maps one segment file and rebuilds its state. It
// returns nil, nil for a last segment whose creation was interrupted (it is
// removed).
func (l *Log) openSegment(first Seq, isLast bool, marker cleanMarker, hasMarker bool) (*segment, error) {
	path := filepath.Join(l.dir, segName(first))
	mode := os.O_RDWR
	if l.opts.ReadOnly {
		mode = os.O_RDONLY
	}
	f, err := l.fs.OpenFile(path, mode, 0)
	if err != nil {
		return nil, fmt.Errorf("seglog: open segment: %w", err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("seglog: open segment: %w", err)
	}
	size &^= recAlign - 1
	limit := size
	if isLast {
		// The active segment may grow to the current SegmentSize (or
		// keep what it already has, if SegmentSize shrank).
		limit = max(size, l.opts.SegmentSize)
	}
	s := &segment{path: path, first: first, f: f, size: size, limit: limit, end: segHeaderSize, last: first - 1, sparseIndex: noIndex()}
	if err := s.mapFile(l.opts.writeViaMap); err != nil {
		f.Close()
		return nil, fmt.Errorf("seglog: open segment: %w", err)
	}
	if err := l.loadSegment(s, isLast, marker, hasMarker); err != nil {
		s.release()
		if errors.Is(err, errTornCreate) {
			if l.opts.ReadOnly {
				return nil, nil
			}
			if rerr := l.fs.Remove(path); rerr != nil {
				return nil, fmt.Errorf("seglog: remove half-created segment: %w", rerr)
			}
			_ = l.fs.Remove(idxPath(l.dir, first))
			return nil, nil
		}
		return nil, err
	}
	return s, nil
}

var errTornCreate = errors.New("segment creation was interrupted")

// loadSegment fills in end, last and the index of s.
func (l *Log) loadSegment(s *segment, isLast bool, marker cleanMarker, hasMarker bool) (err error) {
	defer unguard(&err, s.path, guard())
	if s.size < segHeaderSize || !checkSegHeader(s.data, s.first) {
		// The header is the first write to a new segment and reaches the
		// disk with its first fsync; a torn or missing header in the last
		// segment with no intact record after it means the creation was cut
		// short and nothing in the file was ever durable.
		// A reused spare still has its old header there (an earlier
		// first): the same case, the new header never reached the disk.
		// Unless records of it were durable (the hint): then the header
		// was too, and this is damage.
		created := s.size < segHeaderSize || allZero(s.data[:segHeaderSize]) || staleSegHeader(s.data, s.first)
		if isLast && created && l.rec.DurableHint < s.first {
			return errTornCreate
		}
		if _, _, found := findNextRecord(s.data, segHeaderSize, s.first); isLast && !found {
			return errTornCreate
		}
		return &CorruptError{Path: s.path, Reason: "bad segment header"}
	}
	idxBytes, _ := readFile(l.fs, idxPath(l.dir, s.first))
	x, okIdx := decodeIndex(idxBytes, s.first, s.size)
	if okIdx {
		s.idxLast = x.last
	} else if idxBytes != nil || isLast && hasMarker && marker.segFirst == s.first {
		l.rec.BadIndexes++ // damaged, or gone though the marker vouches for it
	}
	// An index is never trusted when an intact record follows its end:
	// index files are written without fsync, so after a power cut an older
	// one (from a Close while the segment was active) may be what survived.
	stale := okIdx && followedByRecord(s.data, x.end, x.last+1)
	trusted := okIdx && !stale && (!isLast || (hasMarker && marker.segFirst == s.first && marker.last == x.last && marker.end == x.end))
	if trusted && l.verifies(s, isLast) {
		if bad := verifyIndexed(s, x); bad != "" {
			// Scan it instead: the scan names the damage (or skips it).
			// A clean Close had made every record up to the marker's
			// last durable, so damage there is never a torn tail.
			trusted = false
			if hasMarker {
				l.rec.DurableHint = max(l.rec.DurableHint, marker.last)
			}
		}
		if !isLast {
			dropPages(s)
		}
	}
	if trusted {
		s.end, s.last = x.end, x.last
		s.loadIndex(x.entries)
		l.restoreSkipped(s, x.skipped, x.last+1)
		l.rec.Clean = isLast
		return nil
	}
	start, seq := int64(segHeaderSize), s.first
	if (isLast || stale) && okIdx && len(x.entries) > 0 && !l.opts.Verify {
		// Resume from the last index point if the record there is intact.
		e := x.entries[len(x.entries)-1]
		if h, st := checkRecord(s.data, e.off); st == recOK && h.seq == e.seq {
			s.loadIndex(x.entries[:len(x.entries)-1])
			l.restoreSkipped(s, x.skipped, e.seq)
			start, seq = e.off, e.seq
		}
	}
	if err := l.scanSegment(s, start, seq, isLast); err != nil {
		return err
	}
	if !isLast {
		l.rec.RebuiltIndexes++
		s.idxDirty = true
		if l.opts.Verify {
			dropPages(s)
		}
	}
	return nil
}

// scanSegment verifies records from off on (expecting seq first) and sets
// s.end and s.last. The records of a segment end where no intact record
// numbered seq or above follows: past that lie zeros, or a reused spare's
// old records (numbered below s.first), or in the last segment a torn
// tail. In a sealed segment records lost from the end show as a gap before
// the next segment (checkContinuity). A damaged record that intact records
// follow is corruption (an error, or with SkipCorrupt a skipped range),
// except in the last segment when it is a torn write (tornBefore): the torn
// tail is then cut (cutTail) and reported.
func (l *Log) scanSegment(s *segment, off int64, seq Seq, tail bool) error {
	for off+recHeaderSize <= s.size {
		h, st := checkRecord(s.data, off)
		if st == recOK && h.seq == seq && h.side() {
			// a side record (side.go): kept, numbered by the record after it
			l.rec.ScannedBytes += h.size()
			off += h.size()
			continue
		}
		if st == recOK && h.seq == seq {
			s.addIndex(seq, off, l.opts.IndexInterval, false)
			l.rec.ScannedBytes += h.size()
			off += h.size()
			seq++
			continue
		}
		if st == recZero && (!tail || seq > l.rec.DurableHint) {
			break
		}
		// The damaged range runs to the next intact record; its lengths
		// come from that record, never from the damaged header.
		p, ph, found := findNextRecord(s.data, off+recAlign, seq)
		// here: records are missing right here, and the intact record at
		// off is the first that follows (a skipped range still runs to p).
		here := st == recOK && h.seq > seq
		next := p
		if here {
			next = off
		}
		// The end, or a torn write; unless the log had made seq durable
		// before the crash (the hint): then records it confirmed are
		// damaged or missing.
		confirmed := tail && seq <= l.rec.DurableHint
		if !confirmed && (!(found || here) || (tail && tornBefore(s.data, off, next, seq, st))) {
			break
		}
		reason := st.String()
		switch {
		case here:
			reason = fmt.Sprintf("sequence %d where %d was expected", h.seq, seq)
		case st == recOK || st == recZero:
			reason = "missing"
		}
		if confirmed {
			reason += fmt.Sprintf(" (the log had made every record up to %d durable)", l.rec.DurableHint)
		}
		cerr := &CorruptError{Path: s.path, Offset: off, Seq: seq, Reason: reason}
		if !l.opts.SkipCorrupt {
			return cerr
		}
		if !found {
			// Nothing intact follows: what is lost runs to the durable
			// point (a hole reads as corrupt), and appends go on from here.
			to := seq - 1
			if confirmed && !here {
				to = max(to, l.rec.DurableHint)
			}
			// Appends go on at off, over the damaged bytes: the range
			// recorded spans none of them (a read-only Open, which
			// appends nothing, reports how many there are).
			n := int64(0)
			if l.opts.ReadOnly {
				n = s.size - off
			}
			l.skipRange(s, SkippedRange{Path: s.path, Offset: off, Length: n, From: seq, To: to})
			seq = to + 1
			break
		}
		l.skipRange(s, SkippedRange{Path: s.path, Offset: off, Length: p - off, From: seq, To: ph.seq - 1})
		if !ph.side() {
			// Reads must not walk through the damage. (A side record is
			// numbered by a record that may never follow: an index
			// entry past the segment's last record is refused.)
			s.addIndex(ph.seq, p, l.opts.IndexInterval, true)
		}
		off, seq = p, ph.seq
	}
	s.end, s.last = off, seq-1
	if tail {
		return l.cutTail(s, seq)
	}
	return nil
}

// tornBefore reports whether the damaged record at off in the last segment
// (numbered seq; st says how it failed) is a torn write, given the intact
// record numbered seq or above at p: the disk wrote later pages before
// this one, so the record was never confirmed. The records from p on say
// so with their durable hints: if none of them claims seq durable, it was
// not (a damaged record that was durable is corruption). Records without a
// hint (written before hints existed) fall back to the mark an interrupted
// write leaves in space that was zero: a disk sector never written
// (looksTorn).
func tornBefore(buf []byte, off, p int64, seq Seq, st recStatus) bool {
	hinted := true
	for q := p; ; {
		h, hst := checkRecord(buf, q)
		if hst != recOK || h.seq < seq {
			next, _, ok := findNextRecord(buf, q+recAlign, seq)
			if !ok {
				break
			}
			q = next
			continue
		}
		d, has := h.durableBelow()
		if !has {
			hinted = false
		} else if d >= seq {
			return false
		}
		q += h.size()
	}
	if hinted {
		return true
	}
	return st != recOK && looksTorn(buf, off, p-off)
}

// skipRange records a damaged range of s passed over with SkipCorrupt.
func (l *Log) skipRange(s *segment, r SkippedRange) {
	s.skip(r)
	s.idxDirty = true
	l.rec.Skipped = append(l.rec.Skipped, r)
}

// restoreSkipped takes the damaged ranges an index recorded for s, those
// starting below seq, as skipped by an earlier Open: reads report them as
// corrupt and Recovery lists them again, without SkipCorrupt.
func (l *Log) restoreSkipped(s *segment, recorded []SkippedRange, seq Seq) {
	for _, r := range recorded {
		if r.From >= seq {
			continue
		}
		r.Path, r.Recorded = s.path, true
		s.skip(r)
		l.rec.Skipped = append(l.rec.Skipped, r)
	}
}

// writeRebuiltIndexes writes the index of every sealed segment that Open
// scanned or found damaged, so later opens need neither the scan nor, for
// a range skipped with SkipCorrupt, SkipCorrupt again. Best effort: a
// missing index costs only a scan.
func (l *Log) writeRebuiltIndexes() {
	for _, s := range l.segs.sealed() {
		if s.idxDirty {
			_ = writeFileAtomic(l.fs, l.dir, filepath.Base(idxPath(l.dir, s.first)), encodeIndex(s), false)
			s.idxDirty = false
		}
	}
}

// followedByRecord reports whether an intact record with sequence number
// seq starts at off.
func followedByRecord(buf []byte, off int64, seq Seq) bool {
	h, st := checkRecord(buf, off)
	return st == recOK && h.seq == seq
}

// findNextRecord looks for the next intact record at or after off whose
// sequence number is at least seq.
func findNextRecord(buf []byte, off int64, seq Seq) (int64, recHeader, bool) {
	for ; off+recHeaderSize <= int64(len(buf)); off += recAlign {
		if !mayHead(buf, off, seq) {
			continue
		}
		if h, st := checkRecord(buf, off); st == recOK && h.seq >= seq {
			return off, h, true
		}
	}
	return 0, recHeader{}, false
}

// mayHead is the cheap test findNextRecord and cutTail make before any
// checksum (a reused spare's old records, numbered below the segment, and
// zeros fail it): buf[off:] may head a record numbered seq or above,
// within as many records as the segment could hold.
func mayHead(buf []byte, off int64, seq Seq) bool {
	b := buf[off : off+recHeaderSize]
	n := Seq(binary.LittleEndian.Uint64(b[8:]))
	return n >= seq && n-seq <= Seq(len(buf)/recHeaderSize) && validFlags(binary.LittleEndian.Uint16(b[24:]))
}

// cutTail zeroes what follows s.end in the last segment that could ever
// pass for a record: the sectors of the header at s.end (a damaged
// header does not say how long its record was), and every intact header
// numbered next (the first sequence number after the recovered records) or
// above, with its record, so that a torn write's leftovers and the records
// after it are gone before new records take their numbers. Other bytes
// there stay (zeros, a reused spare's old records numbered below the
// segment, fragments with no intact header): no scan takes them for
// records. It reports the cut (after a crash in a reused spare that may
// include a few hundred bytes of its old records).
func (l *Log) cutTail(s *segment, next Seq) error {
	dirtyEnd := s.end
	// Whatever sits right at the end (a damaged header, which says
	// nothing of its length) goes too, to the end of its disk sector.
	if head := min((s.end+recHeaderSize+511)&^511, s.size); !allZero(s.data[s.end:head]) {
		dirtyEnd = head
	}
	for off := s.end; off+recHeaderSize <= s.size; {
		// Skip what the file system knows holds no data (unwritten
		// preallocated space reads as zero): a tail of untouched
		// preallocation costs a syscall, not a read of every page.
		if off&(64<<10-1) == 0 || off == s.end {
			d, ok := nextData(s.f, off)
			if ok && d >= s.size {
				break
			}
			if ok && d > off {
				off = (d + recAlign - 1) &^ (recAlign - 1)
				continue
			}
		}
		if mayHead(s.data, off, next) {
			if h, st := checkRecordData(s.data, off, false); st == recOK || st == recOutOfMap {
				dirtyEnd = max(dirtyEnd, min(off+h.size(), s.size))
			}
		}
		off += recAlign
	}
	if dirtyEnd == s.end {
		return nil
	}
	l.rec.TruncatedPath, l.rec.TruncatedAt, l.rec.TruncatedBytes = s.path, s.end, dirtyEnd-s.end
	if l.opts.ReadOnly {
		return nil // reported, left in place
	}
	zeros := make([]byte, min(dirtyEnd-s.end, 1<<20))
	for off := s.end; off < dirtyEnd; {
		n := min(int64(len(zeros)), dirtyEnd-off)
		if _, err := s.f.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("%w: cutting the torn tail of %s: %w", ErrWriteFailed, s.path, err)
		}
		off += n
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("%w: cutting the torn tail of %s: %w", ErrSyncFailed, s.path, err)
	}
	return nil
}

// nextData returns the offset of the first byte at or after off that the
// file system may hold data for (lseek SEEK_DATA); everything before it
// reads as zero. It returns the file's size when nothing follows, and
// ok == false when the file system cannot tell (then assume data at off).
func nextData(f File, off int64) (int64, bool) {
	d, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	if errors.Is(err, unix.ENXIO) {
		size, serr := f.Size()
		return size, serr == nil
	}
	return d, err == nil
}

// gapError describes records missing between the sealed segment prev and
// the next segment s, naming the file at fault: prev when its index says
// it held them (its end was damaged or cut off), else the segment file
// that would hold them (deleted).
func (l *Log) gapError(prev, s *segment) *CorruptError {
	between := fmt.Sprintf("records %d..%d are missing: no segment holds them between %s (ends at seq %d, offset %d) and %s (starts at seq %d)",
		prev.last+1, s.first-1, filepath.Base(prev.path), prev.last, prev.end, filepath.Base(s.path), s.first)
	switch {
	case prev.idxLast > prev.last:
		return &CorruptError{Path: prev.path, Offset: prev.end, Seq: prev.last + 1,
			Reason: between + fmt.Sprintf("; its index says it held up to %d: its end is damaged or was cut off", prev.idxLast)}
	case prev.idxLast == prev.last && prev.idxLast != 0:
		return &CorruptError{Path: filepath.Join(l.dir, segName(prev.last+1)), Seq: prev.last + 1,
			Reason: between + "; the segment file that held them was deleted"}
	}
	return &CorruptError{Path: prev.path, Offset: prev.end, Seq: prev.last + 1,
		Reason: between + fmt.Sprintf("; the end of %s was damaged or cut off, or the segment file after it deleted", filepath.Base(prev.path))}
}

// checkContinuity verifies that segments follow each other without gaps or
// overlaps. A gap (records lost from the end of a sealed segment) is
// corruption, skipped with SkipCorrupt.
func (l *Log) checkContinuity() error {
	for i := 1; i < len(l.segs); i++ {
		prev, s := l.segs[i-1], l.segs[i]
		switch {
		case prev.last+1 == s.first:
		case prev.last >= s.first:
			return &CorruptError{Path: s.path, Seq: s.first, Reason: fmt.Sprintf("overlaps the previous segment, which ends at seq %d", prev.last)}
		case !l.opts.SkipCorrupt:
			return l.gapError(prev, s)
		default:
			// The records lost from the end of prev become a hole in it,
			// so its index can record them (see writeRebuiltIndexes).
			l.skipRange(prev, SkippedRange{Path: prev.path, Offset: prev.end, From: prev.last + 1, To: s.first - 1})
			prev.last = s.first - 1
		}
	}
	return nil
}
