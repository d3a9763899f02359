package seglog

import (
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"time"
)

// MemStore is a Store that keeps records in memory only: nothing survives
// the process. It is a feature for users who want no disk (queue.Memory
// and queue.OpenMemory keep their queues in it), and the one in-memory
// store of the repository: the tests' per-directory, fault-injecting logs
// (internal/memstore) wrap it rather than copy it. Every
// record is "durable" as soon as Append returns (Durable equals the last
// sequence number), whatever the policy.
type MemStore struct {
	mu     sync.RWMutex
	recs   []Record // recs[i].Seq == first+i
	first  Seq
	closed bool
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty in-memory store whose first record will get
// sequence number 1.
func NewMemStore() *MemStore { return &MemStore{first: 1} }

// Append copies entries into the store and returns the first sequence number
// given. It fails with ErrClosed after Close, ErrEmptyBatch for no entries
// and ErrTooLarge for a Meta longer than MaxMetaSize; on failure nothing of
// the batch is stored.
func (m *MemStore) Append(entries []Entry) (Seq, error) {
	if len(entries) == 0 {
		return 0, ErrEmptyBatch
	}
	for i := range entries {
		if len(entries[i].Meta) > MaxMetaSize {
			return 0, fmt.Errorf("%w: entry %d meta is %d bytes (max %d)", ErrTooLarge, i, len(entries[i].Meta), MaxMetaSize)
		}
	}
	now := time.Now().UnixNano()
	// Copy outside the lock: one allocation holds every Meta and Data.
	total := 0
	for i := range entries {
		total += len(entries[i].Meta) + len(entries[i].Data)
	}
	buf := make([]byte, 0, total)
	batch := make([]Record, len(entries))
	for i, e := range entries {
		ts := e.Time
		if ts == 0 {
			ts = now
		}
		start := len(buf)
		buf = append(buf, e.Meta...)
		meta := buf[start:len(buf):len(buf)]
		start = len(buf)
		buf = append(buf, e.Data...)
		data := buf[start:len(buf):len(buf)]
		batch[i] = Record{Time: ts, Meta: meta, Data: data, CRC: entryCRC(e)}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	first := m.first + Seq(len(m.recs))
	for i := range batch {
		batch[i].Seq = first + Seq(i)
	}
	m.recs = append(m.recs, batch...)
	return first, nil
}

// Sync returns the last sequence number (memory needs no flush), or
// ErrClosed.
func (m *MemStore) Sync() (Seq, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return 0, ErrClosed
	}
	return m.first + Seq(len(m.recs)) - 1, nil
}

// Durable returns the last sequence number appended.
func (m *MemStore) Durable() Seq {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.first + Seq(len(m.recs)) - 1
}

// Bounds returns the first retained and last appended sequence numbers.
func (m *MemStore) Bounds() (first, last Seq) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.first, m.first + Seq(len(m.recs)) - 1
}

// Read returns the record seq. Its Meta and Data are shared with the store:
// never modify them.
func (m *MemStore) Read(seq Seq) (Record, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return Record{}, ErrClosed
	}
	if seq < m.first || seq >= m.first+Seq(len(m.recs)) {
		return Record{}, fmt.Errorf("%w: seq %d outside [%d, %d]", ErrNotFound, seq, m.first, m.first+Seq(len(m.recs))-1)
	}
	return m.recs[seq-m.first], nil
}

// Scan calls fn for records from max(from, first) onwards; see Store.Scan.
// maxBytes <= 0 means no byte limit. fn runs without any lock held, so it
// may call other methods of the store.
func (m *MemStore) Scan(from Seq, maxBytes int, fn func(Record) bool) error {
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return ErrClosed
	}
	if from < m.first {
		from = m.first
	}
	var snap []Record
	if idx := int(from - m.first); from-m.first < Seq(len(m.recs)) {
		snap = m.recs[idx:] // records are immutable once appended
	}
	m.mu.RUnlock()
	passed := 0
	for i := range snap {
		n := len(snap[i].Data)
		if maxBytes > 0 && i > 0 && passed+n > maxBytes {
			return nil
		}
		passed += n
		if !fn(snap[i]) {
			return nil
		}
	}
	return nil
}

// TruncateFront discards every record below seq (exactly; a MemStore keeps
// none of them). A seq past the end empties the store; sequence numbers
// still continue from where they were.
func (m *MemStore) TruncateFront(seq Seq) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	next := m.first + Seq(len(m.recs))
	if seq > next {
		seq = next
	}
	if seq <= m.first {
		return nil
	}
	drop := int(seq - m.first)
	// Copy the rest so the dropped records can be garbage collected.
	m.recs = append([]Record(nil), m.recs[drop:]...)
	m.first = seq
	return nil
}

// Close releases the records. A second Close returns nil.
func (m *MemStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.recs = nil
	return nil
}

// SideRecords reports false: a MemStore keeps no side records.
func (m *MemStore) SideRecords() bool { return false }

// AppendSide fails with an error wrapping errors.ErrUnsupported (see
// SideRecords).
func (m *MemStore) AppendSide(Entry) (uint64, error) {
	return 0, fmt.Errorf("%w: seglog.MemStore keeps no side records", errors.ErrUnsupported)
}

// DurableSide returns 0: there are no side records.
func (m *MemStore) DurableSide() uint64 { return 0 }

// ScanSide passes nothing: there are no side records.
func (m *MemStore) ScanSide(Seq, func(Record) bool) error { return nil }

// SwapCount returns 0: a MemStore replaces no segments.
func (m *MemStore) SwapCount() uint64 { return 0 }

// ReleaseSwapped does nothing: a MemStore holds no replaced maps.
func (m *MemStore) ReleaseSwapped(uint64) {}

// entryCRC is e's data CRC: the caller's when given, else computed.
func entryCRC(e Entry) uint32 {
	if e.CRC != 0 {
		return e.CRC
	}
	return crc32.ChecksumIEEE(e.Data)
}
