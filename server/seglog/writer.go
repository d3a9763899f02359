package seglog

import (
	"sync"
	"sync/atomic"
)

// writer is the state of the log's one writer (Append, AppendSide), under
// its mutex: one write at a time. Close and Abandon take the mutex too, to
// wait for the write under way.
type writer struct {
	mu      sync.Mutex
	writing atomic.Int32 // writes between entering and finishing (Sync waits briefly for them)
	act     *segment     // the active segment, as the writer sees it (also Log.segs[len-1])
	buf     []byte       // the encode buffer
	dirty   int64        // bytes past the active end a failed write may have touched
	// markerLive: Open found a valid clean-shutdown marker and left it in
	// place; the first write removes it (durably), and a Close with no
	// write in between has nothing to record.
	markerLive bool
}

// maxKeptBuf: a larger encode buffer is dropped after its write, so a huge
// batch does not pin its memory.
const maxKeptBuf = 4 << 20

// lock starts a write: it counts the writer as on its way, then waits for
// the mutex.
func (w *writer) lock() {
	w.writing.Add(1)
	w.mu.Lock()
}

// unlock ends what lock started.
func (w *writer) unlock() {
	w.mu.Unlock()
	w.writing.Add(-1)
}

// busy reports whether a write is on its way (Sync lets it finish first).
func (w *writer) busy() bool { return w.writing.Load() > 0 }

// trimBuf drops the encode buffer after a huge batch.
func (w *writer) trimBuf() {
	if cap(w.buf) > maxKeptBuf {
		w.buf = nil
	}
}
