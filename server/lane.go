package server

// The lane: a per-connection queue of durable commands that must run off the
// event loop (they touch the disk: topic/group creation, management verbs)
// or behind one that does. Commands keep their effects in the order the
// client sent them: while the lane is busy, every later durable command
// queues on it too; when it is idle, they run inline on the input goroutine.
// Answer slots are reserved on the input goroutine before queuing, so the
// answers keep their order whatever runs where.

import (
	"github.com/fibrilmq/fibril/protocol"
	"sync/atomic"
)

// laneState is a connection's lane.
type laneState struct {
	busy bool       // under client.mu: the lane goroutine runs
	q    []laneFunc // under client.mu: durable commands queued, in order
	// stall: parsing waits for the lane to drain (an unconfirmed publish
	// found it over its bound; see serialOrStall). Any goroutine.
	stall atomic.Bool
}

// laneFunc is one queued command. onLane says it runs on the lane
// goroutine, where it may block on the engine.
type laneFunc func(onLane bool)

// serial runs fn now (onLane false) when the lane is idle, else queues it.
// It reports false when the lane is over its bound (the caller answers
// queue_full). Input goroutine only.
func (c *client) serial(fn laneFunc) bool {
	c.mu.Lock()
	if !c.lane.busy {
		c.mu.Unlock()
		fn(false)
		return true
	}
	if len(c.lane.q) >= c.laneLimit() {
		c.mu.Unlock()
		return false
	}
	c.lane.q = append(c.lane.q, fn)
	c.mu.Unlock()
	return true
}

// toLane queues fn on the lane, starting the lane goroutine when idle.
// Called on the input goroutine (or by an inline laneFunc, which only runs
// when the lane is idle, so fn goes first).
func (c *client) toLane(fn laneFunc) {
	c.mu.Lock()
	c.lane.q = append(c.lane.q, fn)
	start := !c.lane.busy
	c.lane.busy = true
	c.mu.Unlock()
	if start {
		go c.laneLoop()
	}
}

func (c *client) laneLoop() {
	for {
		c.mu.Lock()
		if len(c.lane.q) == 0 {
			c.lane.busy = false
			c.lane.q = nil
			c.mu.Unlock()
			c.unstallLane()
			return
		}
		fn := c.lane.q[0]
		c.lane.q[0] = nil
		c.lane.q = c.lane.q[1:]
		drained := len(c.lane.q) <= c.laneLimit()/2
		c.mu.Unlock()
		if drained {
			c.unstallLane()
		}
		fn(true)
	}
}

// serialOrStall is serial for a command that has no answer to refuse with
// (an unconfirmed publish): when the lane is over its bound the command is
// queued all the same and parsing stops (HandleCommand returns errPause)
// until the lane has drained to half its bound. Nothing is dropped; a client
// that keeps sending meanwhile fills its input buffer up to MaxInputBuffer
// and is then told so and closed. Input goroutine only.
func (c *client) serialOrStall(fn laneFunc) {
	c.mu.Lock()
	if !c.lane.busy {
		c.mu.Unlock()
		fn(false)
		return
	}
	c.lane.q = append(c.lane.q, fn)
	if len(c.lane.q) >= c.laneLimit() {
		c.lane.stall.Store(true)
	}
	c.mu.Unlock()
}

// unstallLane resumes parsing stopped by serialOrStall (lane goroutine).
func (c *client) unstallLane() {
	if c.lane.stall.CompareAndSwap(true, false) {
		c.tr.wake()
	}
}

// laneLimit bounds queued commands (each may hold a copied message).
func (c *client) laneLimit() int { return c.srv.opts.MaxUnconfirmed + 64 }

// laneFull answers a command refused because the lane is full.
func (c *client) laneFull(slot *answer) {
	c.complete(slot, c.errLine(protocol.CodeQueueFull, "too many commands waiting"))
}

// blocking runs fn on the lane, in command order. It reports false when the
// lane is full. Input goroutine only.
func (c *client) blocking(fn func()) bool {
	return c.serial(func(onLane bool) {
		if onLane {
			fn()
			return
		}
		c.toLane(func(bool) { fn() })
	})
}
