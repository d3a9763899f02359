package server

// Publisher stalls (SPEC.md 7.7): as in NATS, a publisher whose fan-out
// pushes a plain subscriber's unwritten output past half of MaxPending
// waits: its input is not parsed (and, once it has moved off its event
// loop, conn_moved.go, not read, so TCP slows it) until that subscriber
// drains below the mark, closes, or maxStall passes. A fast publisher and
// a slower subscriber then settle at the subscriber's pace instead of the
// subscriber being cut as a slow consumer. A subscriber that takes nothing
// is still cut, by MaxPending or the write deadline; meanwhile each
// publisher to it waits at most maxStall per stall.

import (
	"sync/atomic"
	"time"
)

// publisherStall is the slow plain subscriber a publisher waits for. Any
// goroutine; set and cleared by the publisher's input goroutine.
type publisherStall struct {
	sub   atomic.Pointer[client] // nil: not waiting
	since atomic.Int64           // unix nanos when the wait began
}

// maxStall bounds one wait of a publisher for one slow subscriber.
const maxStall = time.Second

// overStallMark reports whether this connection's unwritten output is over
// half of MaxPending. Any goroutine.
func (c *client) overStallMark() bool {
	c.mu.Lock()
	over := !c.isClosing() && c.pendingLocked() > c.srv.opts.MaxPending/2
	c.mu.Unlock()
	return over
}

// stallOn makes this publisher wait for sub, whose output passed the mark.
// Input goroutine only.
func (c *client) stallOn(sub *client) {
	if sub == c || c.stall.sub.Load() != nil {
		return // its own output already stops its parsing (outputOver)
	}
	c.stall.since.Store(time.Now().UnixNano())
	c.stall.sub.Store(sub)
}

// consumerStall reports whether parsing must still wait for the slow
// subscriber stallOn recorded, and forgets it once not. Input goroutine
// only.
func (c *client) consumerStall() bool {
	sub := c.stall.sub.Load()
	if sub == nil {
		return false
	}
	if sub.overStallMark() && time.Now().UnixNano()-c.stall.since.Load() < int64(maxStall) {
		// Part of its output may be in its transport (gnet's buffer),
		// whose size it records only when it runs: wake it to write and
		// record, or the mark stays passed on a stale figure.
		sub.tr.wake()
		return true
	}
	c.stall.sub.Store(nil)
	return false
}
