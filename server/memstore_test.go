package server

import (
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/fibrilmq/fibril/server/seglog"
)

// memStores is a test tool: in-memory seglog stores keyed by directory, so
// a durable engine can run in tests before the file-backed log is wired.
type memStores struct {
	mu   sync.Mutex
	logs map[string]*memLog
}

func newMemStores() *memStores { return &memStores{logs: map[string]*memLog{}} }

func (m *memStores) open(dir string, _ seglog.Policy) (seglog.Store, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.logs[dir]
	if l == nil {
		l = &memLog{first: 1}
		m.logs[dir] = l
	}
	return l, nil
}

type memLog struct {
	mu    sync.Mutex
	first seglog.Seq
	recs  []seglog.Record
}

var errMemNotFound = errors.New("mem store: not found")

func (l *memLog) Append(es []seglog.Entry) (seglog.Seq, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := l.first + seglog.Seq(len(l.recs))
	for i, e := range es {
		l.recs = append(l.recs, seglog.Record{Seq: first + seglog.Seq(i), Time: e.Time,
			Meta: append([]byte(nil), e.Meta...), Data: append([]byte(nil), e.Data...),
			CRC: crc32.ChecksumIEEE(e.Data)})
	}
	return first, nil
}

func (l *memLog) Sync() (seglog.Seq, error) { return l.Durable(), nil }

func (l *memLog) Durable() seglog.Seq { _, last := l.Bounds(); return last }

func (l *memLog) Bounds() (seglog.Seq, seglog.Seq) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first, l.first + seglog.Seq(len(l.recs)) - 1
}

func (l *memLog) Read(seq seglog.Seq) (seglog.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq < l.first || seq >= l.first+seglog.Seq(len(l.recs)) {
		return seglog.Record{}, fmt.Errorf("read %d: %w", seq, errMemNotFound)
	}
	return l.recs[seq-l.first], nil
}

func (l *memLog) Scan(from seglog.Seq, maxBytes int, fn func(seglog.Record) bool) error {
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

func (l *memLog) TruncateFront(seq seglog.Seq) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	end := l.first + seglog.Seq(len(l.recs))
	seq = min(seq, end)
	if seq <= l.first {
		return nil
	}
	l.recs = append([]seglog.Record(nil), l.recs[seq-l.first:]...)
	l.first = seq
	return nil
}

func (l *memLog) Close() error { return nil }
