package main

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
)

// latEntry is one first delivery: when its message was sent (Unix nanos)
// and how long it took to arrive.
type latEntry struct{ sent, lat int64 }

// latChunk entries go in fixed chunks, so recording never copies what was
// recorded before: a growing slice's copies stall the consumer that makes
// them (a non-preemptible memmove the GC then waits for), which is the very
// kind of tail the log is there to find.
const latChunk = 1 << 16

// latLog records every first delivery of one consumer. chunks are made up
// front for the expected count; cur is the one being filled.
type latLog struct {
	consumer int
	mu       sync.Mutex // uncontended: a consumer's deliveries, one at a time
	chunks   [][]latEntry
	cur      int
}

// maxReserved caps what newLatLog makes up front (4M entries, 96 MiB);
// past it chunks are made as they fill.
const maxReserved = 1 << 22

// newLatLog reserves room for about expect entries of consumer up front.
func newLatLog(consumer int, expect int64) *latLog {
	l := &latLog{consumer: consumer}
	for n := int64(0); n < min(max(expect, 1), maxReserved); n += latChunk {
		l.chunks = append(l.chunks, make([]latEntry, 0, latChunk))
	}
	return l
}

func (l *latLog) add(sent, lat int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.chunks[l.cur]) == latChunk {
		l.cur++
		if l.cur == len(l.chunks) {
			l.chunks = append(l.chunks, make([]latEntry, 0, latChunk)) // copies headers only
		}
	}
	l.chunks[l.cur] = append(l.chunks[l.cur], latEntry{sent: sent, lat: lat})
}

// len is the number of entries recorded.
func (l *latLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.chunks {
		n += len(c)
	}
	return n
}

// writeLatencyLog writes every consumer's entries to path, sorted by send
// time: one line per first delivery, "<sent unix ns> <latency ns>
// <consumer>".
func writeLatencyLog(path string, logs []*latLog) (err error) {
	type row struct {
		latEntry
		consumer int
	}
	var all []row
	for _, l := range logs {
		l.mu.Lock()
		for _, c := range l.chunks {
			for _, e := range c {
				all = append(all, row{e, l.consumer})
			}
		}
		l.mu.Unlock()
	}
	slices.SortFunc(all, func(a, b row) int { return cmp.Compare(a.sent, b.sent) })
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("latency log: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("latency log: %w", cerr)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	var line []byte
	for _, e := range all {
		line = strconv.AppendInt(line[:0], e.sent, 10)
		line = append(line, ' ')
		line = strconv.AppendInt(line, e.lat, 10)
		line = append(line, ' ')
		line = strconv.AppendInt(line, int64(e.consumer), 10)
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			return fmt.Errorf("latency log: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("latency log: %w", err)
	}
	return nil
}
