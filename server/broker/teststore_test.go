package broker

import (
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/fibrilmq/fibril/server/seglog"
)

// testStores is a fault-injecting test tool: in-memory logs that survive a
// broker's Close/Open (kept by directory) and can be made to fail. It stands
// in for seglog's own stores where a test needs the faults.
type testStores struct {
	mu         sync.Mutex
	logs       map[string]*testLog
	failAppend atomic.Bool
	failEvents atomic.Bool // fail appends to event logs only
}

func newTestStores() *testStores { return &testStores{logs: map[string]*testLog{}} }

func (s *testStores) open(dir string, _ seglog.Policy) (seglog.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[dir]
	if l == nil {
		l = &testLog{first: 1, set: s, events: filepath.Base(dir) == eventsLogName}
		s.logs[dir] = l
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open {
		return nil, fmt.Errorf("test store %s: already open", dir)
	}
	l.open = true
	return l, nil
}

type testLog struct {
	mu     sync.Mutex
	set    *testStores
	open   bool
	events bool
	first  seglog.Seq
	recs   []seglog.Record // recs[i].Seq == first+i
}

var errTestClosed = errors.New("test store closed")
var errTestNotFound = errors.New("test store: not found")

func (l *testLog) Append(es []seglog.Entry) (seglog.Seq, error) {
	if l.set.failAppend.Load() || (l.events && l.set.failEvents.Load()) {
		return 0, errors.New("test store: injected append failure")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.open {
		return 0, errTestClosed
	}
	first := l.first + seglog.Seq(len(l.recs))
	for i, e := range es {
		r := seglog.Record{
			Seq: first + seglog.Seq(i), Time: e.Time,
			Meta: append([]byte(nil), e.Meta...), Data: append([]byte(nil), e.Data...),
			CRC: crc32.ChecksumIEEE(e.Data),
		}
		l.recs = append(l.recs, r)
	}
	return first, nil
}

func (l *testLog) Sync() (seglog.Seq, error) { return l.Durable(), nil }

func (l *testLog) Durable() seglog.Seq {
	_, last := l.Bounds()
	return last
}

func (l *testLog) Bounds() (seglog.Seq, seglog.Seq) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first, l.first + seglog.Seq(len(l.recs)) - 1
}

func (l *testLog) Read(seq seglog.Seq) (seglog.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq < l.first || seq >= l.first+seglog.Seq(len(l.recs)) {
		return seglog.Record{}, fmt.Errorf("read %d: %w", seq, errTestNotFound)
	}
	return l.recs[seq-l.first], nil
}

func (l *testLog) Scan(from seglog.Seq, maxBytes int, fn func(seglog.Record) bool) error {
	l.mu.Lock()
	recs, first := l.recs, l.first
	l.mu.Unlock()
	if from < first {
		from = first
	}
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

func (l *testLog) TruncateFront(seq seglog.Seq) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	end := l.first + seglog.Seq(len(l.recs))
	if seq > end {
		seq = end
	}
	if seq <= l.first {
		return nil
	}
	l.recs = append([]seglog.Record(nil), l.recs[seq-l.first:]...)
	l.first = seq
	return nil
}

func (l *testLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open = false
	return nil
}
