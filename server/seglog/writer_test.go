package seglog

import "testing"

// TestWriterBusyAndBuffer: a write counts as on its way from lock to
// unlock (waiting for the mutex included), and only a huge encode buffer
// is dropped after its write.
func TestWriterBusyAndBuffer(t *testing.T) {
	var w writer
	if w.busy() {
		t.Fatal("busy before any write")
	}
	w.lock()
	entered := make(chan struct{})
	go func() {
		w.lock() // waits: counts as on its way
		close(entered)
		w.unlock()
	}()
	waitFor(t, "the second writer to count", func() bool { return w.writing.Load() == 2 })
	w.unlock()
	<-entered
	waitFor(t, "both writes to end", func() bool { return !w.busy() })

	for _, c := range []struct {
		cap  int
		kept bool
	}{{1 << 10, true}, {maxKeptBuf, true}, {maxKeptBuf + 1, false}} {
		w.buf = make([]byte, 0, c.cap)
		w.trimBuf()
		if (w.buf != nil) != c.kept {
			t.Fatalf("buffer of %d bytes kept = %v, want %v", c.cap, w.buf != nil, c.kept)
		}
	}
}
