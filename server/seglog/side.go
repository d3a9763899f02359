package seglog

import (
	"fmt"
	"sort"
	"time"
)

// Side records let a caller make bytes of its own durable with the log's
// next fsync, without giving them a sequence number: the broker copies a
// round's consumer events into the data log this way, so one fsync of the
// data log makes both the messages and the events of a commit durable,
// and the event log itself is fsynced off the critical path.
//
// A side record is a record (record.go) flagged as side, whose seq field
// is the number the next record will get. Read and Scan never return one
// and the index never points at one; recovery checks them like any other
// record (a damaged one is a torn write or corruption by the same rules)
// and keeps them in place; ScanSide reads them back. They are written
// only into the active segment after at least one record of it, never
// across a roll (ErrSideNoRoom): a segment is never started for them.
//
// Caveat: the durable point and its hints count records, not side
// records, so a damaged side record followed by records whose hints do
// not claim the record after it durable passes for a torn write, even if
// a Sync had covered it.

// SideRecords implements Store: a Log keeps side records.
func (l *Log) SideRecords() bool { return true }

// AppendSide implements Store.
func (l *Log) AppendSide(e Entry) (uint64, error) {
	sz, err := l.checkEntry(&e, -1)
	if err != nil {
		return 0, err
	}
	l.w.lock()
	defer l.w.unlock()
	if err := l.beginWrite(); err != nil {
		return 0, err
	}
	act := l.w.act
	if act.last < act.first {
		return 0, fmt.Errorf("%w: %s holds no record yet", ErrSideNoRoom, act.path)
	}
	if act.end+sz > act.limit {
		return 0, fmt.Errorf("%w: %s has %d bytes left, the side record needs %d", ErrSideNoRoom, act.path, act.limit-act.end, sz)
	}
	ts := e.Time
	if ts == 0 {
		ts = time.Now().UnixNano()
	}
	next := act.last + 1
	l.w.buf = appendRecordFlags(l.w.buf[:0], next, encodeSideHint(next, l.Durable()), ts, e.Meta, e.Data, e.CRC)
	if err := l.grow(act, act.end+int64(len(l.w.buf))); err != nil {
		return 0, err
	}
	if err := l.writeAt(act, l.w.buf, act.end); err != nil {
		l.w.dirty = int64(len(l.w.buf))
		return 0, fmt.Errorf("%w: %s at %d: %w", ErrWriteFailed, act.path, act.end, err)
	}
	l.mu.Lock()
	act.end += int64(len(l.w.buf))
	mark := l.dur.addSide()
	l.mu.Unlock()
	if l.opts.Policy == PolicyNone {
		l.wb.add(int64(len(l.w.buf))) // counted; the next Append decides
	}
	l.w.trimBuf()
	return mark, nil
}

// DurableSide implements Store.
func (l *Log) DurableSide() uint64 { return l.dur.sideDurable() }

// ScanSide implements Store. It reads segment by segment and runs fn
// without locks held, with records borrowed as from Scan.
func (l *Log) ScanSide(from Seq, fn func(Record) bool) error {
	var recs []Record
	for i := 0; ; i++ {
		var err error
		var more bool
		recs, more, err = l.sideRecords(i, from, recs[:0])
		if err != nil {
			return err
		}
		for _, r := range recs {
			if !fn(r) {
				return nil
			}
		}
		if !more {
			return nil
		}
	}
}

// sideRecords appends to out the side records numbered from or above in
// the i-th segment, and reports whether more segments follow.
func (l *Log) sideRecords(i int, from Seq, out []Record) (_ []Record, more bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed.Load() {
		return out, false, ErrClosed
	}
	if i >= len(l.segs) {
		return out, false, nil
	}
	s := l.segs[i]
	more = i+1 < len(l.segs)
	if s.last+1 < from {
		return out, more, nil // every side record in s is numbered s.last+1 or below
	}
	v, err := l.view(s)
	if err != nil {
		return out, false, err
	}
	defer unguard(&err, s.path, guard())
	off := int64(segHeaderSize)
	if j := sort.Search(len(v.index), func(j int) bool { return v.index[j].seq >= from }) - 1; j >= 0 {
		off = v.index[j].off
	}
	buf := v.data[:v.end]
	for off < v.end {
		h, st := checkRecord(buf, off)
		if st != recOK {
			if r, ok := s.skippedAt(off); ok {
				off += r.Length
				continue
			}
			return out, false, &CorruptError{Path: s.path, Offset: off, Reason: st.String()}
		}
		if h.side() && h.seq >= from {
			out = append(out, recordAt(v.data, off, h))
		}
		off += h.size()
	}
	return out, more, nil
}

// skippedAt returns the damaged range skipped with SkipCorrupt that starts
// at off, if there is one with a length.
func (d *damage) skippedAt(off int64) (SkippedRange, bool) {
	for _, r := range d.skipped {
		if r.Offset == off && r.Length > 0 {
			return r, true
		}
	}
	return SkippedRange{}, false
}

// pastSide returns the offset of the first record at or after off in buf
// that is not an intact side record (checked by header only): where a
// reader moving forward finds the next record.
func pastSide(buf []byte, off int64) int64 {
	for off < int64(len(buf)) {
		h, st := checkRecordData(buf, off, false)
		if st != recOK || !h.side() {
			break
		}
		off += h.size()
	}
	return off
}
