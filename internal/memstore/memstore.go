// Package memstore is a fault-injecting set of in-memory logs for tests:
// seglog.MemStore logs (the one in-memory seglog.Store, a production
// feature behind queue.OpenMemory) kept by directory in a Stores value, so
// that an engine can be closed and opened again on them (or a copy of them
// taken as of a crash), with appends made to fail on demand. This package
// adds only what a test needs around them: the directory map, reopening,
// crash copies, lost tails and injected failures.
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

// ErrNotFound is wrapped by Read for a sequence outside the log's bounds
// (it is seglog.ErrNotFound, which seglog.MemStore returns) and by LoseTail
// for a directory without a log.
var ErrNotFound = seglog.ErrNotFound

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
		l = &Log{set: s, dir: dir, mem: seglog.NewMemStore()}
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
		_, last := l.mem.Bounds()
		c.logs[dir] = &Log{set: c, dir: dir, mem: copyUpTo(l.mem, last)}
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
	if _, end := l.mem.Bounds(); last < end {
		l.mem = copyUpTo(l.mem, last)
	}
	return nil
}

// copyUpTo returns a new MemStore with src's bounds and records up to
// last. A MemStore always starts at sequence 1, so the copy skips to src's
// first sequence by appending empty records and truncating them away.
func copyUpTo(src *seglog.MemStore, last seglog.Seq) *seglog.MemStore {
	dst := seglog.NewMemStore()
	first, _ := src.Bounds()
	if first > 1 {
		mustOK(dst.Append(make([]seglog.Entry, first-1)))
		if err := dst.TruncateFront(first); err != nil {
			panic(err)
		}
	}
	if last < first {
		return dst
	}
	var batch []seglog.Entry
	err := src.Scan(first, 0, func(r seglog.Record) bool {
		if r.Seq > last {
			return false
		}
		batch = append(batch, seglog.Entry{Time: r.Time, Meta: r.Meta, Data: r.Data, CRC: r.CRC})
		return true
	})
	if err != nil {
		panic(err) // only after Close, which a Log never does to its MemStore
	}
	if len(batch) > 0 {
		mustOK(dst.Append(batch))
	}
	return dst
}

// mustOK panics on an Append error: appends to a fresh MemStore of
// entries it stored before cannot fail.
func mustOK(_ seglog.Seq, err error) {
	if err != nil {
		panic(err)
	}
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

// Log is one in-memory log of a Stores: a seglog.MemStore that outlives
// Close (so it can be opened again) and whose appends can be made to fail.
// Everything appended is durable at once.
type Log struct {
	set  *Stores
	dir  string
	mu   sync.Mutex // guards open and mem (replaced by LoseTail)
	open bool
	mem  *seglog.MemStore // never closed: the records stay for a reopen
}

var _ seglog.Store = (*Log)(nil)

// store returns the log's MemStore.
func (l *Log) store() *seglog.MemStore {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mem
}

// Append stores copies of es and returns the first one's sequence. It
// fails with ErrInjected while a FailAppends fault matches the directory
// and with ErrClosed after Close.
func (l *Log) Append(es []seglog.Entry) (seglog.Seq, error) {
	if f := l.set.fail.Load(); f != nil && (*f)(l.dir) {
		return 0, fmt.Errorf("append to %s: %w", l.dir, ErrInjected)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.open {
		return 0, fmt.Errorf("append to %s: %w", l.dir, ErrClosed)
	}
	first, err := l.mem.Append(es)
	if err != nil {
		return 0, fmt.Errorf("append to %s: %w", l.dir, err)
	}
	return first, nil
}

// Sync returns the last sequence: everything is durable once appended.
func (l *Log) Sync() (seglog.Seq, error) { return l.store().Sync() }

// Durable returns the last sequence.
func (l *Log) Durable() seglog.Seq { return l.store().Durable() }

// Bounds returns the first and last sequence (last = first-1 when empty).
func (l *Log) Bounds() (first, last seglog.Seq) { return l.store().Bounds() }

// Read returns the record at seq, or an error wrapping ErrNotFound.
func (l *Log) Read(seq seglog.Seq) (seglog.Record, error) {
	r, err := l.store().Read(seq)
	if err != nil {
		return r, fmt.Errorf("read in %s: %w", l.dir, err)
	}
	return r, nil
}

// Scan is seglog.MemStore.Scan: records from from on, until fn returns
// false or about maxBytes of data were passed (at least one record).
func (l *Log) Scan(from seglog.Seq, maxBytes int, fn func(seglog.Record) bool) error {
	return l.store().Scan(from, maxBytes, fn)
}

// TruncateFront drops the records before seq.
func (l *Log) TruncateFront(seq seglog.Seq) error { return l.store().TruncateFront(seq) }

// SideRecords is false, and the side-record and held-map methods below
// are seglog.MemStore's: none kept.
func (l *Log) SideRecords() bool { return l.store().SideRecords() }

// AppendSide fails with an error wrapping errors.ErrUnsupported.
func (l *Log) AppendSide(e seglog.Entry) (uint64, error) { return l.store().AppendSide(e) }

// DurableSide returns 0.
func (l *Log) DurableSide() uint64 { return l.store().DurableSide() }

// ScanSide passes nothing.
func (l *Log) ScanSide(from seglog.Seq, fn func(seglog.Record) bool) error {
	return l.store().ScanSide(from, fn)
}

// SwapCount returns 0.
func (l *Log) SwapCount() uint64 { return l.store().SwapCount() }

// ReleaseSwapped does nothing.
func (l *Log) ReleaseSwapped(upto uint64) { l.store().ReleaseSwapped(upto) }

// Close marks the log closed; its records stay in its Stores.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open = false
	return nil
}
