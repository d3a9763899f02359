// Package memstore is an in-memory, fault-injecting implementation of
// seglog.Store for tests: logs kept by directory in a Stores value, so that
// an engine can be closed and opened again on them (or a copy of them taken
// as of a crash), with appends made to fail on demand.
//
// It is test support only and must never be imported by non-test code: it
// keeps every record in memory forever, never syncs anything to disk, and
// its faults are switched by the test. It knows nothing of the broker; the
// broker's and the server's tests plug Stores.Open into
// broker.Options.OpenStore.
package memstore

import (
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fibrilmq/fibril/server/seglog"
)

// ErrInjected is returned by Append while a fault set with FailAppends
// matches the log's directory.
var ErrInjected = errors.New("memstore: injected append failure")

// ErrClosed is returned by Append on a log that was closed.
var ErrClosed = errors.New("memstore: log closed")

// ErrNotFound is wrapped by Read for a sequence outside the log's bounds.
var ErrNotFound = errors.New("memstore: not found")

// ErrAlreadyOpen is wrapped by Open for a directory whose log is open.
var ErrAlreadyOpen = errors.New("memstore: already open")

// Stores holds in-memory logs by directory. The zero value is not usable;
// call New. It is safe for concurrent use.
type Stores struct {
	mu   sync.Mutex
	logs map[string]*Log
	fail atomic.Pointer[func(dir string) bool]
}

// New returns an empty set of logs.
func New() *Stores { return &Stores{logs: map[string]*Log{}} }

// Open returns the log kept for dir, creating it empty (first sequence 1)
// the first time. It has the signature of broker.StoreOpener. A log can be
// open once at a time: opening it again before Close fails with an error
// wrapping ErrAlreadyOpen, as a second opener of a directory would.
func (s *Stores) Open(dir string, _ seglog.Policy) (seglog.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[dir]
	if l == nil {
		l = &Log{set: s, dir: dir, first: 1}
		s.logs[dir] = l
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open {
		return nil, fmt.Errorf("open %s: %w", dir, ErrAlreadyOpen)
	}
	l.open = true
	return l, nil
}

// FailAppends makes Append fail with ErrInjected on every log whose
// directory match reports true, from now until the next call; nil turns
// the fault off.
func (s *Stores) FailAppends(match func(dir string) bool) {
	if match == nil {
		s.fail.Store(nil)
		return
	}
	s.fail.Store(&match)
}

// CrashCopy returns new Stores holding a copy of every log as it is now,
// closed, under the directory rename(dir) (rename nil: the same
// directories): what a restarted process would find after a crash at this
// instant. Faults are not copied.
func (s *Stores) CrashCopy(rename func(dir string) string) *Stores {
	c := New()
	s.mu.Lock()
	defer s.mu.Unlock()
	for dir, l := range s.logs {
		if rename != nil {
			dir = rename(dir)
		}
		l.mu.Lock()
		c.logs[dir] = &Log{set: c, dir: dir, first: l.first, recs: append([]seglog.Record(nil), l.recs...)}
		l.mu.Unlock()
	}
	return c
}

// LoseTail simulates a crash that lost the records of dir's log after
// last (they were written but never synced). The log must be closed.
func (s *Stores) LoseTail(dir string, last seglog.Seq) error {
	s.mu.Lock()
	l := s.logs[dir]
	s.mu.Unlock()
	if l == nil {
		return fmt.Errorf("memstore: no log at %s: %w", dir, ErrNotFound)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open {
		return fmt.Errorf("memstore: %s: %w", dir, ErrAlreadyOpen)
	}
	if keep := int(last - l.first + 1); keep >= 0 && keep < len(l.recs) {
		l.recs = l.recs[:keep]
	}
	return nil
}

// RenameUnder is a CrashCopy rename that moves every directory under from
// to the same place under to.
func RenameUnder(from, to string) func(string) string {
	return func(dir string) string {
		if rest, ok := strings.CutPrefix(dir, from); ok {
			return to + rest
		}
		return dir
	}
}

// Log is one in-memory log. Everything appended is durable at once.
type Log struct {
	set   *Stores
	dir   string
	mu    sync.Mutex
	open  bool
	first seglog.Seq
	recs  []seglog.Record // recs[i].Seq == first+i
}

var _ seglog.Store = (*Log)(nil)

// Append stores copies of es and returns the first one's sequence.
func (l *Log) Append(es []seglog.Entry) (seglog.Seq, error) {
	if f := l.set.fail.Load(); f != nil && (*f)(l.dir) {
		return 0, fmt.Errorf("append to %s: %w", l.dir, ErrInjected)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.open {
		return 0, fmt.Errorf("append to %s: %w", l.dir, ErrClosed)
	}
	first := l.first + seglog.Seq(len(l.recs))
	for i, e := range es {
		l.recs = append(l.recs, seglog.Record{
			Seq: first + seglog.Seq(i), Time: e.Time,
			Meta: append([]byte(nil), e.Meta...), Data: append([]byte(nil), e.Data...),
			CRC: entryCRC(e),
		})
	}
	return first, nil
}

// Sync returns the last sequence: everything is durable once appended.
func (l *Log) Sync() (seglog.Seq, error) { return l.Durable(), nil }

// Durable returns the last sequence.
func (l *Log) Durable() seglog.Seq {
	_, last := l.Bounds()
	return last
}

// Bounds returns the first and last sequence (last = first-1 when empty).
func (l *Log) Bounds() (first, last seglog.Seq) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first, l.first + seglog.Seq(len(l.recs)) - 1
}

// Read returns the record at seq, or an error wrapping ErrNotFound.
func (l *Log) Read(seq seglog.Seq) (seglog.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq < l.first || seq >= l.first+seglog.Seq(len(l.recs)) {
		return seglog.Record{}, fmt.Errorf("read %d in %s: %w", seq, l.dir, ErrNotFound)
	}
	return l.recs[seq-l.first], nil
}

// Scan calls fn for the records from from on, until fn returns false or
// about maxBytes of data were passed (at least one record).
func (l *Log) Scan(from seglog.Seq, maxBytes int, fn func(seglog.Record) bool) error {
	l.mu.Lock()
	recs, first := l.recs, l.first
	l.mu.Unlock()
	from = max(from, first)
	n := 0
	for i := int(from - first); i < len(recs); i++ {
		if n > 0 && n >= maxBytes {
			return nil
		}
		n += len(recs[i].Data)
		if !fn(recs[i]) {
			return nil
		}
	}
	return nil
}

// TruncateFront drops the records before seq.
func (l *Log) TruncateFront(seq seglog.Seq) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	seq = min(seq, l.first+seglog.Seq(len(l.recs)))
	if seq <= l.first {
		return nil
	}
	l.recs = append([]seglog.Record(nil), l.recs[seq-l.first:]...)
	l.first = seq
	return nil
}

// Close marks the log closed; its records stay in its Stores.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open = false
	return nil
}

// entryCRC is e's data CRC: the caller's when given (seglog.Entry.CRC),
// else computed.
func entryCRC(e seglog.Entry) uint32 {
	if e.CRC != 0 {
		return e.CRC
	}
	return crc32.ChecksumIEEE(e.Data)
}
