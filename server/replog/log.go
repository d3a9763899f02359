package replog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
)

// Log is one of a Pair's two logs as a seglog.Store. On the serving
// leader Append assigns seqs after everything applied and pending, keeps
// the records in the pending buffer (Read and Scan serve them from
// there until they are applied) and proposes them without waiting;
// Sync waits until every entry proposed before it is committed and
// applied. Everywhere, reads go to the local log the state machine
// writes. Seqs are the same on every replica.
type Log struct {
	p   *Pair
	tag byte // tagData or tagEvents
	// local is the local log the state machine writes; a restore from a
	// peer swaps it for its replacement (restore.go).
	local atomic.Pointer[seglog.Log]

	// Under p.mu. applyNext is written by the apply worker only.
	applyNext seglog.Seq      // the seq the next applied record gets
	next      seglog.Seq      // serving: the seq the next Append gets
	pend      []seglog.Record // appended, not yet applied, in seq order
	cutAsked  seglog.Seq      // the highest truncation proposed this epoch
	closed    bool
}

var _ seglog.Store = (*Log)(nil)

// loc returns the local log.
func (l *Log) loc() *seglog.Log { return l.local.Load() }

// Append stamps entries (time, CRC), proposes them as one or more raft
// entries and returns the first seq, without waiting for any. It fails,
// nothing appended, with ErrNotLeader off the serving leader, ErrBusy at
// the pending bound or the group's, seglog.ErrTooLarge for a record that
// cannot fit an entry. If a later raft entry of a split batch is
// refused, the epoch ends (ErrNotLeader, the earlier ones' outcome
// unknown).
func (l *Log) Append(entries []seglog.Entry) (seglog.Seq, error) {
	if len(entries) == 0 {
		return 0, seglog.ErrEmptyBatch
	}
	p := l.p
	limit := p.cfg.Group.MaxEntryBytes - entrySlack
	size := 0
	for i := range entries {
		n := recordSize(&entries[i])
		if n > limit {
			return 0, fmt.Errorf("%w: record %d is %d bytes, a raft entry holds %d", seglog.ErrTooLarge, i, n, limit)
		}
		if len(entries[i].Meta) > seglog.MaxMetaSize {
			return 0, fmt.Errorf("%w: entry %d meta is %d bytes (max %d)", seglog.ErrTooLarge, i, len(entries[i].Meta), seglog.MaxMetaSize)
		}
		size += len(entries[i].Meta) + len(entries[i].Data)
	}
	now := time.Now().UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case l.closed:
		return 0, seglog.ErrClosed
	case !p.serving || p.closing:
		return 0, fmt.Errorf("%w: %s", ErrNotLeader, p.dir)
	case p.pending+size > p.cfg.MaxPendingBytes:
		return 0, fmt.Errorf("%w: %d bytes pending (max %d)", ErrBusy, p.pending, p.cfg.MaxPendingBytes)
	}
	first := l.next
	for from := 0; from < len(entries); {
		to, n := from, 0
		for to < len(entries) && (to == from || n+recordSize(&entries[to]) <= limit) {
			n += recordSize(&entries[to])
			to++
		}
		seq := first + seglog.Seq(from)
		buf := make([]byte, 0, n+entrySlack)
		buf = appendRecords(header(buf, l.tag, p.id, p.epoch), seq, entries[from:to], now)
		if err := p.proposeLocked(buf, true, nil); err != nil {
			if from == 0 {
				return 0, err
			}
			changed := p.failEpochLocked(fmt.Errorf("part of a batch was refused: %w", err))
			if changed {
				defer p.fire() // after the unlock (deferred calls run last first)
			}
			return 0, fmt.Errorf("%w: %s: part of a batch was refused: %v", ErrNotLeader, p.dir, err)
		}
		// The pending records borrow buf, which nothing else writes.
		e, _ := decodeEntry(buf)
		l.pend = append(l.pend, e.recs...)
		from = to
	}
	l.next = first + seglog.Seq(len(entries))
	p.pending += size
	return first, nil
}

// trimPendLocked drops the pending records at or below upto (applied).
func (l *Log) trimPendLocked(upto seglog.Seq) {
	i := 0
	for i < len(l.pend) && l.pend[i].Seq <= upto {
		l.p.pending -= len(l.pend[i].Meta) + len(l.pend[i].Data)
		i++
	}
	if i == 0 {
		return
	}
	n := copy(l.pend, l.pend[i:])
	clear(l.pend[n:])
	l.pend = l.pend[:n]
	if l.p.pending < 0 {
		l.p.pending = 0
	}
}

// pendLocked returns the pending record seq.
func (l *Log) pendLocked(seq seglog.Seq) (seglog.Record, bool) {
	if len(l.pend) == 0 || seq < l.pend[0].Seq || seq > l.pend[len(l.pend)-1].Seq {
		return seglog.Record{}, false
	}
	return l.pend[seq-l.pend[0].Seq], true
}

// Sync waits until every entry proposed before the call is committed on
// a quorum (fsynced in its raft logs) and applied here, and returns the
// last applied seq. It fails with ErrNotLeader off the serving leader or
// once an entry of the epoch was lost.
func (l *Log) Sync() (seglog.Seq, error) {
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.closed {
		return 0, seglog.ErrClosed
	}
	if brokenConfirmBeforeCommit && p.serving {
		return l.next - 1, nil
	}
	if err := p.waitLocked(); err != nil {
		return 0, err
	}
	return l.applyNext - 1, nil
}

// Durable returns the last applied seq: committed on a quorum.
func (l *Log) Durable() seglog.Seq {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	if brokenConfirmBeforeCommit && l.p.serving {
		return l.next - 1
	}
	return l.applyNext - 1
}

// Bounds returns the local log's first seq and the last seq: the last
// appended on the serving leader, the last applied elsewhere.
func (l *Log) Bounds() (first, last seglog.Seq) {
	first, _ = l.loc().Bounds()
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	last = l.applyNext - 1
	if l.p.serving {
		last = l.next - 1
	}
	return min(first, last+1), last
}

// Read returns record seq, from the pending buffer or the local log.
func (l *Log) Read(seq seglog.Seq) (seglog.Record, error) {
	l.p.mu.Lock()
	r, ok := l.pendLocked(seq)
	l.p.mu.Unlock()
	if ok {
		return r, nil
	}
	// Not pending: applied (the local log is written before a record
	// leaves the buffer), truncated, or never appended.
	return l.loc().Read(seq)
}

// Scan passes the local log's records from seq, then the pending ones
// after them; see seglog.Store.Scan.
func (l *Log) Scan(from seglog.Seq, maxBytes int, fn func(seglog.Record) bool) error {
	// The pending records first: one that leaves the buffer meanwhile
	// is in the local log already.
	l.p.mu.Lock()
	pend := l.pend[:len(l.pend):len(l.pend)]
	l.p.mu.Unlock()
	passed, n, stopped := 0, 0, false
	var seen seglog.Seq
	pass := func(r seglog.Record) bool {
		if maxBytes > 0 && n > 0 && passed+len(r.Data) > maxBytes {
			stopped = true
			return false
		}
		passed += len(r.Data)
		n++
		seen = r.Seq
		if !fn(r) {
			stopped = true
			return false
		}
		return true
	}
	if err := l.loc().Scan(from, maxBytes, pass); err != nil {
		return err
	}
	if _, localLast := l.loc().Bounds(); stopped || n > 0 && seen < localLast {
		return nil // fn said stop, or the byte budget ended in the local log
	}
	for _, r := range pend {
		if r.Seq < from || r.Seq <= seen {
			continue
		}
		if !pass(r) {
			return nil
		}
	}
	return nil
}

// TruncateFront proposes the truncation of this log below
// seq, on every replica, and returns without waiting (Bounds moves once
// it is applied). Off the serving leader it fails with ErrNotLeader.
func (l *Log) TruncateFront(seq seglog.Seq) error {
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case l.closed:
		return seglog.ErrClosed
	case !p.serving || p.closing:
		return fmt.Errorf("%w: %s", ErrNotLeader, p.dir)
	case seq <= l.cutAsked:
		return nil
	}
	buf := header(nil, l.tag+(tagTruncData-tagData), p.id, p.epoch)
	buf = binary.AppendUvarint(buf, uint64(seq))
	if err := p.proposeLocked(buf, false, nil); err != nil {
		return fmt.Errorf("replog: truncate below %d: %w", seq, err)
	}
	l.cutAsked = seq
	return nil
}

// Close closes this log; the second of the pair to close stops the
// group and closes both local logs. A second Close returns nil.
func (l *Log) Close() error {
	l.p.mu.Lock()
	if l.closed {
		l.p.mu.Unlock()
		return nil
	}
	l.closed = true
	l.p.cond.Broadcast()
	l.p.mu.Unlock()
	return l.p.logClosed()
}

// SideRecords reports false: side records are not replicated.
func (l *Log) SideRecords() bool { return false }

// AppendSide fails with an error wrapping errors.ErrUnsupported.
func (l *Log) AppendSide(seglog.Entry) (uint64, error) {
	return 0, fmt.Errorf("%w: replog keeps no side records", errors.ErrUnsupported)
}

// DurableSide returns 0: there are no side records.
func (l *Log) DurableSide() uint64 { return 0 }

// ScanSide passes nothing: there are no side records.
func (l *Log) ScanSide(seglog.Seq, func(seglog.Record) bool) error { return nil }

// SwapCount returns 0: the local logs are not compressed.
func (l *Log) SwapCount() uint64 { return 0 }

// ReleaseSwapped does nothing: no replaced maps are held.
func (l *Log) ReleaseSwapped(uint64) {}

func appendUvarint(b []byte, x uint64) []byte { return binary.AppendUvarint(b, x) }
