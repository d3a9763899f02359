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
	age, tick := now.Sub(c.live.created), c.srv.tickEvery()
	if at := c.srv.opts.AuthTimeout; age >= at-tick && age <= at+2*tick {
		// Nothing read yet (conn_gnet.go, "Pre-auth reads") and the
		// timeout is due by the next tick: what did arrive, under
		// preAuthLowat bytes, is read and answered first, the timeout
		// waiting a tick or two at most for the loop to get to it.
		if c.login.lowat.CompareAndSwap(lowatRaised, lowatRescue) {
			c.tr.wake()
			return
		}
		if c.login.lowat.Load() == lowatRescue {
			return
		}
	}
	if c.state.load().authClockRuns() && age > c.srv.opts.AuthTimeout {
		c.fail(protocol.CodeAuthTimeout, "")
		return
	}
	switch c.live.due(now.UnixNano(), interval, c.srv.opts.MaxPingsOut) {
	case pingStale:
		c.fail(protocol.CodeStaleConnection, "")
	case pingSend:
		c.queueOut(pingLine)
	}
}

// authClockRuns reports whether the auth timeout can end a connection in
// state s. It counts from accept. A check waiting in the queue does not
// hold it off (a flood of CONNECTs would otherwise keep connections and
// their checks alive without end); one being computed or computed does,
// for the time of one hash.
func (s connState) authClockRuns() bool { return s == stateAwaitConnect || s == stateAuthQueued }

// pingAction is what the heartbeat does for a connection.
type pingAction int

const (
	pingNone  pingAction = iota // heard from within the interval
	pingSend                    // silent for the interval: PING it
	pingStale                   // MaxPingsOut PINGs unanswered: close it
)

// due decides the heartbeat at now (unix nanos) for a connection PINGed
// after interval of silence and stale after maxOut unanswered PINGs; a
// PING it asks for is counted as sent.
func (l *liveness) due(now int64, interval time.Duration, maxOut int) pingAction {
	last := max(l.lastIn.Load(), l.lastPing.Load())
	if now-last < int64(interval) {
		return pingNone
	}
	if int(l.pingsOut.Load()) >= maxOut {
		return pingStale
	}
	l.pingsOut.Add(1)
	l.lastPing.Store(now)
	return pingSend
}

// sawInput records liveness: any input counts as an answer to our PINGs.
func (c *client) sawInput(now int64) { c.live.sawInput(now) }

// sawInput records input at now (unix nanos).
func (l *liveness) sawInput(now int64) {
	l.lastIn.Store(now)
	if l.pingsOut.Load() != 0 {
		l.pingsOut.Store(0)
	}
}
