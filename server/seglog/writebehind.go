package seglog

import (
	"sync"
	"sync/atomic"
)

// The background fsync of PolicyNone.
//
// A PolicyNone log that Append wrote writeBehindBytes to since its last
// background fsync starts another one on a goroutine of its own, so the
// dirty pages never pile up: a segment roll, which fsyncs the whole
// segment on the writer's path, used to flush up to 64 MiB at once (p99
// 214-241 ms at 14.5k msgs/s of 1 KiB), and a crash loses at most about
// that much. An fsync by someone else (the owner's Sync, a roll) counts
// as one: nothing piles up then.

// writeBehindBytes: a PolicyNone log that Append wrote this much to since
// its last background fsync starts another one.
const writeBehindBytes = 8 << 20

// writeBehind paces the background fsync. unsynced is the writer's (under
// Log.w.mu); the rest are atomics the fsync goroutine sets.
type writeBehind struct {
	unsynced int64         // bytes written since the last background fsync started
	durable  atomic.Uint64 // the durable point the last check or background fsync left
	running  atomic.Bool   // a background fsync runs
	wg       sync.WaitGroup
}

// add counts n bytes written and reports whether enough piled up since
// the last background fsync for due to decide on another. Called by the
// writer; inlined on its path, where it is all that runs most of the time.
func (w *writeBehind) add(n int64) bool {
	w.unsynced += n
	return w.unsynced >= writeBehindBytes
}

// due reports, once add said enough piled up, whether the background
// fsync must start now, the log being durable up to durable: not while
// one runs, and not when someone else fsynced meanwhile. When it must, it
// counts as running from here: the caller runs it with run, on a
// goroutine of its own. Called by the writer.
func (w *writeBehind) due(durable Seq) (start bool) {
	switch {
	case w.running.Load():
		// The background fsync is still running. Its own durable point
		// must not pass for someone else's fsync below (it is set
		// before w.durable): that skipped the next background fsync
		// (TestWriteBehindNotSkippedWhileItsFsyncRuns).
	case uint64(durable) != w.durable.Load():
		// Someone else fsyncs this log (a caller's own Sync, a roll):
		// nothing piles up.
		w.durable.Store(uint64(durable))
		w.unsynced = 0
	case w.running.CompareAndSwap(false, true):
		w.unsynced = 0
		w.wg.Add(1)
		return true
	}
	return false
}

// run is the background fsync due started: sync fsyncs and returns the
// durable point after it (a failure is sticky: later appends report it).
func (w *writeBehind) run(sync func() Seq) {
	defer w.wg.Done()
	defer w.running.Store(false)
	w.durable.Store(uint64(sync()))
}

// wait waits for a background fsync to end (Close, Abandon).
func (w *writeBehind) wait() { w.wg.Wait() }
