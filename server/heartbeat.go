package server

// Heartbeats (SPEC.md "PING/PONG"): the server PINGs a connection that has
// been silent for PingInterval and closes it as stale after MaxPingsOut
// unanswered PINGs. A connection that has not authenticated within
// AuthTimeout is closed. Runs on gnet's ticker goroutine.

import (
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// liveness is what the heartbeat reads. Any goroutine (created is set
// before the connection is shared).
type liveness struct {
	created  time.Time
	lastIn   atomic.Int64 // unix nanos of the last input
	lastPing atomic.Int64 // unix nanos of the last server PING
	pingsOut atomic.Int32
}

var pingLine = []byte("PING\r\n")

// heartbeat is called by the ticker for every connection.
func (c *client) heartbeat(now time.Time, interval time.Duration) {
	if c.wr.stalled.Load() || c.wr.outBusy.Load() || c.stall.sub.Load() != nil {
		c.tr.wake() // re-check whether its output drained (and the write deadline)
	}
	// The auth timeout counts from accept. A check waiting in the queue
	// does not hold it off (a flood of CONNECTs would otherwise keep
	// connections and their checks alive without end); one being computed
	// or computed does, for the time of one hash.
	if st := c.state.load(); (st == stateAwaitConnect || st == stateAuthQueued) && now.Sub(c.live.created) > c.srv.opts.AuthTimeout {
		c.fail(protocol.CodeAuthTimeout, "")
		return
	}
	last := max(c.live.lastIn.Load(), c.live.lastPing.Load())
	if now.UnixNano()-last < int64(interval) {
		return
	}
	if int(c.live.pingsOut.Load()) >= c.srv.opts.MaxPingsOut {
		c.fail(protocol.CodeStaleConnection, "")
		return
	}
	c.live.pingsOut.Add(1)
	c.live.lastPing.Store(now.UnixNano())
	c.queueOut(pingLine)
}

// sawInput records liveness: any input counts as an answer to our PINGs.
func (c *client) sawInput(now int64) {
	c.live.lastIn.Store(now)
	if c.live.pingsOut.Load() != 0 {
		c.live.pingsOut.Store(0)
	}
}
