package boltstore

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
	bolt "go.etcd.io/bbolt"
)

// Log is one log of a Storage: a seglog.Store whose records are the keys
// of one bucket. Safe for concurrent use.
type Log struct {
	st       *Storage
	name     string
	bucket   []byte
	buffered bool // PolicyCaller, PolicyNone: Append does not wait for the commit

	mu sync.Mutex
	// first, last: the bounds readers see. Records above durable are in
	// mem (mem[i].seq == durable+1+i), not yet committed.
	first, last, durable seglog.Seq
	mem                  []pend
	memBytes             int
	// truncTo: a TruncateFront not yet committed (0: none).
	truncTo seglog.Seq
	// gen counts changes (appends, truncations); doneGen is the last
	// committed. A commit takes everything up to gen.
	gen, doneGen uint64
	failed       error // a commit failed: sticky until reopened
	closed       bool
}

var _ seglog.Store = (*Log)(nil)

// pend is a record appended and not yet committed: its encoded value,
// immutable once built.
type pend struct {
	seq seglog.Seq
	val []byte
}

// maxScanChunk bounds what one read transaction of Scan copies out.
const (
	maxScanChunk      = 256
	maxScanChunkBytes = 1 << 20
)

// Append encodes entries into one buffer and adds them to the log. Under
// PolicySync it returns once a bbolt commit holding them returned; under
// PolicyCaller and PolicyNone once they are in memory (committed within
// 100 ms, or by Sync). It fails with seglog.ErrEmptyBatch,
// seglog.ErrTooLarge (nothing stored), seglog.ErrClosed, or the error of
// a failed commit (wrapping seglog.ErrSyncFailed: the records stay
// readable, never durable).
func (l *Log) Append(entries []seglog.Entry) (seglog.Seq, error) {
	if len(entries) == 0 {
		return 0, seglog.ErrEmptyBatch
	}
	total := 0
	for i := range entries {
		e := &entries[i]
		n := valueSize(e)
		if len(e.Meta) > seglog.MaxMetaSize || n > bolt.MaxValueSize {
			return 0, fmt.Errorf("%w: log %s: entry %d: meta %d bytes (max %d), value %d bytes (max %d)",
				seglog.ErrTooLarge, l.name, i, len(e.Meta), seglog.MaxMetaSize, n, bolt.MaxValueSize)
		}
		total += n
	}
	now := time.Now().UnixNano()
	buf := make([]byte, 0, total)
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	// Encoding under the lock: the header CRC covers the sequence number.
	first := l.last + 1
	for i := range entries {
		start := len(buf)
		buf = appendValue(buf, first+seglog.Seq(i), &entries[i], now)
		l.mem = append(l.mem, pend{seq: first + seglog.Seq(i), val: buf[start:len(buf):len(buf)]})
	}
	l.last += seglog.Seq(len(entries))
	l.memBytes += total
	l.gen++
	gen, wait := l.gen, !l.buffered || l.memBytes >= maxPendingBytes
	l.mu.Unlock()
	if wait {
		if err := l.st.commitFor(l, gen); err != nil {
			return 0, err
		}
	}
	return first, nil
}

// usable is nil, ErrClosed or the sticky commit error (mu held).
func (l *Log) usable() error {
	if l.closed {
		return seglog.ErrClosed
	}
	return l.failed
}

// Sync commits every record appended before the call and returns the
// durable point. Concurrent Syncs (of any log of the Storage) share a
// commit.
func (l *Log) Sync() (seglog.Seq, error) {
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return l.durable, err
	}
	gen := l.gen
	l.mu.Unlock()
	err := l.st.commitFor(l, gen)
	return l.Durable(), err
}

// Durable returns the last sequence number committed.
func (l *Log) Durable() seglog.Seq {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.durable
}

// Bounds returns the first retained and the last appended sequence numbers.
func (l *Log) Bounds() (first, last seglog.Seq) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first, l.last
}

// Read returns record seq, its checksums verified, as its own copy. It
// fails with seglog.ErrNotFound outside Bounds, seglog.ErrCorrupt for a
// record that fails its checks (or is missing inside the bounds), and
// seglog.ErrClosed after Close.
func (l *Log) Read(seq seglog.Seq) (seglog.Record, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return seglog.Record{}, seglog.ErrClosed
	}
	if seq < l.first || seq > l.last || seq == 0 {
		err := fmt.Errorf("%w: log %s: seq %d outside [%d, %d]", seglog.ErrNotFound, l.name, seq, l.first, l.last)
		l.mu.Unlock()
		return seglog.Record{}, err
	}
	if seq > l.durable {
		p := l.mem[seq-l.durable-1]
		l.mu.Unlock()
		return l.decode(p.seq, p.val)
	}
	l.mu.Unlock()
	var val []byte
	err := l.st.db.View(func(tx *bolt.Tx) error {
		if v := l.bucketIn(tx).Get(key(seq)); v != nil {
			val = append([]byte(nil), v...)
		}
		return nil
	})
	if err != nil {
		return seglog.Record{}, fmt.Errorf("boltstore: %s: log %s: read %d: %w", l.st.path, l.name, seq, err)
	}
	if val == nil {
		if f, _ := l.Bounds(); seq < f {
			return seglog.Record{}, fmt.Errorf("%w: log %s: seq %d truncated away", seglog.ErrNotFound, l.name, seq)
		}
		return seglog.Record{}, l.corrupt(seq, "missing inside the log's bounds")
	}
	return l.decode(seq, val)
}

func (l *Log) bucketIn(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(rootBucket).Bucket(l.bucket) }

func (l *Log) decode(seq seglog.Seq, val []byte) (seglog.Record, error) {
	r, err := decode(seq, val)
	if err != nil {
		return seglog.Record{}, l.corrupt(seq, err.Error())
	}
	return r, nil
}

func (l *Log) corrupt(seq seglog.Seq, why string) error {
	return fmt.Errorf("boltstore: %s: log %s: seq %d: %w: %s", l.st.path, l.name, seq, seglog.ErrCorrupt, why)
}

// Scan calls fn for each record from max(from, first) on, in order, until
// fn returns false, passing the next record would exceed maxBytes of Data
// (at least one record is always passed; maxBytes <= 0: no limit), or the
// end of the log. Committed records are copied out of bbolt a chunk at a
// time and fn runs outside any transaction or lock, so it may call the
// log. It returns the first error (seglog.ErrCorrupt for a damaged record).
func (l *Log) Scan(from seglog.Seq, maxBytes int, fn func(seglog.Record) bool) error {
	seq, passed, counted := from, 0, false
	for {
		recs, err := l.chunk(&seq) // the records before a damaged one, then its error
		for _, r := range recs {
			if maxBytes > 0 && counted && passed+len(r.Data) > maxBytes {
				return nil
			}
			passed += len(r.Data)
			counted = true
			if !fn(r) {
				return nil
			}
		}
		if err != nil || len(recs) == 0 {
			return err
		}
		seq = recs[len(recs)-1].Seq + 1
	}
}

// chunk returns the next records from *seq on (moved up to first): from
// mem above the durable point, else from one read transaction.
func (l *Log) chunk(seq *seglog.Seq) ([]seglog.Record, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, seglog.ErrClosed
	}
	*seq = max(*seq, l.first)
	from, durable, last := *seq, l.durable, l.last
	var mem []pend
	if from > durable && from <= last {
		mem = l.mem[from-durable-1 : last-durable] // immutable once appended
	}
	l.mu.Unlock()
	switch {
	case from > last:
		return nil, nil
	case mem != nil:
		recs := make([]seglog.Record, 0, min(len(mem), maxScanChunk))
		for _, p := range mem[:min(len(mem), maxScanChunk)] {
			r, err := l.decode(p.seq, p.val)
			if err != nil {
				return nil, err
			}
			recs = append(recs, r)
		}
		return recs, nil
	}
	var recs []seglog.Record
	var bad error
	err := l.st.db.View(func(tx *bolt.Tx) error {
		c := l.bucketIn(tx).Cursor()
		size := 0
		for k, v := c.Seek(key(from)); k != nil && len(recs) < maxScanChunk && size < maxScanChunkBytes; k, v = c.Next() {
			s, ok := keySeq(k)
			if !ok || s > durable {
				break
			}
			if len(recs) > 0 && s != recs[len(recs)-1].Seq+1 {
				bad = l.corrupt(recs[len(recs)-1].Seq+1, "missing inside the log's bounds")
				break
			}
			r, err := l.decode(s, append([]byte(nil), v...))
			if err != nil {
				bad = err
				break
			}
			recs = append(recs, r)
			size += len(v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: %s: log %s: scan from %d: %w", l.st.path, l.name, from, err)
	}
	if len(recs) == 0 || recs[0].Seq != from {
		if f, _ := l.Bounds(); from < f {
			return l.chunk(seq) // truncated past from meanwhile: go on from first
		}
		if bad == nil {
			bad = l.corrupt(from, "missing inside the log's bounds")
		}
		return nil, bad
	}
	return recs, bad
}

// TruncateFront drops every record below seq, exactly: at once for
// readers, on disk at the next commit (Sync, Close, a waiting Append of
// any log of the Storage, or the flush within 100 ms). A seq past the end
// empties the log; numbering goes on.
func (l *Log) TruncateFront(seq seglog.Seq) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	seq = min(seq, l.last+1)
	if seq <= l.first {
		return nil
	}
	l.first, l.truncTo = seq, seq
	l.gen++
	return nil
}

// SideRecords reports false: a boltstore log keeps no side records (the
// engine then makes each commit wait for its event log too).
func (l *Log) SideRecords() bool { return false }

// AppendSide fails with an error wrapping errors.ErrUnsupported.
func (l *Log) AppendSide(seglog.Entry) (uint64, error) {
	return 0, fmt.Errorf("%w: boltstore log %s keeps no side records", errors.ErrUnsupported, l.name)
}

// DurableSide returns 0: there are no side records.
func (l *Log) DurableSide() uint64 { return 0 }

// ScanSide passes nothing: there are no side records.
func (l *Log) ScanSide(seglog.Seq, func(seglog.Record) bool) error { return nil }

// SwapCount returns 0: bbolt replaces no segments.
func (l *Log) SwapCount() uint64 { return 0 }

// ReleaseSwapped does nothing: no replaced maps are held.
func (l *Log) ReleaseSwapped(uint64) {}

// Close commits what the log has pending and releases it; the Storage may
// then open it again. A second Close returns nil.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true // no more changes: the commit below takes the last
	gen, failed := l.gen, l.failed
	l.mu.Unlock()
	err := failed
	if err == nil {
		err = l.st.commitFor(l, gen)
	}
	l.st.mu.Lock()
	if l.st.logs[l.name] == l {
		delete(l.st.logs, l.name)
	}
	l.st.mu.Unlock()
	l.mu.Lock()
	l.mem = nil
	l.mu.Unlock()
	return err
}

// take hands the log's uncommitted changes to a commit (ok false: none).
func (l *Log) take() (pending, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen == l.doneGen || l.failed != nil {
		return pending{}, false
	}
	return pending{l: l, recs: l.mem, floor: l.truncTo, gen: l.gen, through: l.last}, true
}

// done records the outcome of the commit that took p.
func (l *Log) done(p pending, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if l.failed == nil {
			l.failed = err
		}
		return
	}
	l.durable = p.through
	l.mem = l.mem[len(p.recs):]
	for _, r := range p.recs {
		l.memBytes -= len(r.val)
	}
	l.doneGen = p.gen
	if l.truncTo == p.floor {
		l.truncTo = 0
	}
}

// committed reports whether the changes up to gen are committed, or the
// error that keeps them from ever being.
func (l *Log) committed(gen uint64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.doneGen >= gen {
		return true, nil
	}
	return false, l.failed
}
