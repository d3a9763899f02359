package server

// Outbound bounds (SPEC.md "Limits", "Slow consumers"). Everything queued
// for one connection and not yet on its socket is counted against
// MaxPending: the outbox, answers completed but held behind earlier ones
// (with the push deliveries waiting behind a SUB's +OK), and what the
// transport still holds (gnet's outbound buffer; the bytes of a TLS write in
// progress). A delivery of any kind (plain, durable push, POLL answer) that
// would pass it makes the connection a slow consumer: it is told why, cut,
// and its leased messages go back to ready for other consumers. A socket
// that takes nothing for WriteDeadline while output waits is cut the same
// way.
//
// A gnet connection's transport holds at most transportWindow (outbuf.go);
// output past it waits in the outbox, and the drain poll below hands it
// over as the socket takes what the transport holds.
//
// Ack-on-write (nats_ack auto, SPEC.md 10.2) settles a delivery only once
// its last byte is on the socket (in the kernel's send buffer), never when
// it is merely queued: each such delivery is remembered with the offset of
// its end in the connection's output stream, and settled when the bytes
// written to the socket pass that offset. While some wait on a full socket,
// a timer wakes the owner to look again (backing off up to drainPollMax).

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/broker"
)

// writeSide is a connection's output not yet on its socket and what bounds
// it. Fields are under client.mu unless marked.
type writeSide struct {
	out         chunks // the outbox: queued bytes not yet handed to tr (outbuf.go)
	wakePending bool   // a wake is requested or the owner is flushing
	outHigh     int    // bytes the transport still holds (owner reports)
	dropped     uint64 // plain deliveries dropped past MaxPending
	// taken: bytes of the output stream handed to the transport so far;
	// onSocket: of those, known to be on the socket; progressAt: unix
	// nanos since which the socket has taken nothing while output waited.
	taken, onSocket uint64
	progressAt      int64
	pollReserved    int        // room reserved under MaxPending by POLLs in progress
	writeAcks       []writeAck // deliveries to ack once on the socket

	// Any goroutine. stalled: parsing waits for output to drain; outBusy:
	// the transport held output at the last write (the ticker wakes such
	// connections to check the write deadline); drainArmed, drainBackoff:
	// the drain poll.
	stalled, outBusy, drainArmed atomic.Bool
	drainBackoff                 atomic.Int64

	// Owner goroutine only: scratch of the gnet owner's flush
	// (conn_gnet.go).
	flushBufs, iov [][]byte
}

// writeAck is a delivery to settle once the output stream's first end bytes
// are on the socket.
type writeAck struct {
	end uint64
	h   broker.Handle
}

// Bounds of the drain poll that settles ack-on-write deliveries waiting on
// a full socket.
const (
	drainPollMin = time.Millisecond
	drainPollMax = 100 * time.Millisecond
)

// overPendingLocked reports whether n more bytes would put this
// connection's held output over MaxPending. A connection holding nothing
// may take one item of any size (a POLL answer or a delivery bigger than
// the limit would otherwise never be sent). c.mu held.
func (c *client) overPendingLocked(n int) bool {
	p := c.pendingLocked()
	return p > 0 && p+n > c.srv.opts.MaxPending
}

// wouldPassPending is overPendingLocked taking c.mu. Safe from any
// goroutine.
func (c *client) wouldPassPending(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overPendingLocked(n)
}

// reservePoll reserves n bytes of room under MaxPending for a POLL answer:
// granted when no POLL holds a reservation (one POLL always may run) or
// when the output held plus the reservations leave n. Safe from any
// goroutine.
func (c *client) reservePoll(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wr.pollReserved > 0 && c.pendingLocked()+c.wr.pollReserved+n > c.srv.opts.MaxPending {
		return false
	}
	c.wr.pollReserved += n
	return true
}

// unreservePoll gives a POLL's reservation back (its answer is complete,
// and now counts as held output, or it failed).
func (c *client) unreservePoll(n int) {
	c.mu.Lock()
	c.wr.pollReserved -= n
	c.mu.Unlock()
}

// pollRoomCheck is how often a POLL waiting for room looks again.
const pollRoomCheck = 5 * time.Millisecond

// waitPollRoom waits (on the lane) until reservePoll grants n bytes; it
// reports false when the connection is closing first (closing drops the
// held answers, so room may appear then). A client that never reads is
// cut by the write deadline, which ends the wait.
func (c *client) waitPollRoom(n int) bool {
	t := time.NewTicker(pollRoomCheck)
	defer t.Stop()
	for {
		if c.isClosing() {
			return false
		}
		if c.reservePoll(n) {
			return true
		}
		select {
		case <-c.ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// slowConsumer cuts the connection: logged with the reason, told with
// slow_consumer, closed; release gives its leases back. Safe from any
// goroutine; must not be called with c.mu held.
func (c *client) slowConsumer(reason string) {
	c.srv.stats.slowConsumers.Add(1)
	c.log.Warn("slow consumer: closing", "reason", reason, "pending_limit", c.srv.opts.MaxPending,
		"write_deadline", c.srv.opts.WriteDeadline)
	c.fail(protocol.CodeSlowConsumer, reason)
}

// overReason is the slow-consumer reason for output past MaxPending.
func (c *client) overReason() string {
	return "output over " + strconv.Itoa(c.srv.opts.MaxPending) + " bytes"
}

// addWriteAckLocked remembers h to settle once the output stream up to the
// current end of the outbox is on the socket. c.mu held.
func (c *client) addWriteAckLocked(h broker.Handle) { c.wr.addWriteAck(h) }

// addWriteAck remembers h to settle once the output stream up to the
// current end of the outbox is on the socket.
func (w *writeSide) addWriteAck(h broker.Handle) {
	w.writeAcks = append(w.writeAcks, writeAck{end: w.taken + uint64(w.out.n), h: h})
}

// wrote records that the transport still holds transportPending of the
// bytes taken so far, at ns (unix nanos). It returns the ack-on-write
// deliveries now on the socket (in order, removed from writeAcks), whether
// the socket has taken nothing for longer than deadline while output
// waited (stuck), whether it took anything since the last call or settled
// acks (progress: the drain poll's back-off restarts), and whether acks
// or output are left waiting for the socket to take more (waiting: nothing
// else would wake the owner for them; never when closing).
func (w *writeSide) wrote(transportPending int, ns, deadline int64, closing bool) (settle []broker.Handle, stuck, progress, waiting bool) {
	onSocket := w.taken - uint64(transportPending)
	moved := onSocket > w.onSocket
	switch {
	case transportPending == 0, w.outHigh == 0, moved:
		// Empty, newly waiting, or moving: the deadline counts from now.
		w.progressAt = ns
	case ns-w.progressAt > deadline:
		stuck = true
	}
	w.onSocket = onSocket
	w.outHigh = transportPending
	n := 0
	for n < len(w.writeAcks) && w.writeAcks[n].end <= onSocket {
		settle = append(settle, w.writeAcks[n].h)
		n++
	}
	if n > 0 {
		w.writeAcks = append(w.writeAcks[:0], w.writeAcks[n:]...)
	}
	waiting = (len(w.writeAcks) > 0 || w.out.n > 0 && transportPending > 0) && !closing
	return settle, stuck, moved || n > 0, waiting
}

// afterWrite is called by the owner after handing output to the
// transport: transportPending is what the transport still holds. It
// returns the ack-on-write deliveries now on the socket (to settle, in
// order) and whether the socket has taken nothing for WriteDeadline while
// output waited (the caller cuts the connection).
func (c *client) afterWrite(transportPending int, now time.Time) (settle []broker.Handle, stuck bool) {
	c.mu.Lock()
	settle, stuck, progress, waiting := c.wr.wrote(transportPending, now.UnixNano(), int64(c.srv.opts.WriteDeadline), c.isClosing())
	c.wr.outBusy.Store(transportPending > 0)
	c.mu.Unlock()
	if waiting {
		c.armDrainPoll(progress)
	}
	return settle, stuck
}

// armDrainPoll makes sure a timer wakes the owner to settle ack-on-write
// deliveries that wait on the socket; progress resets its back-off.
func (c *client) armDrainPoll(progress bool) {
	if progress {
		c.wr.drainBackoff.Store(int64(drainPollMin))
	}
	if !c.wr.drainArmed.CompareAndSwap(false, true) {
		return
	}
	d := time.Duration(c.wr.drainBackoff.Load())
	if d < drainPollMin {
		d = drainPollMin
	}
	c.wr.drainBackoff.Store(int64(min(2*d, drainPollMax)))
	time.AfterFunc(d, func() {
		c.wr.drainArmed.Store(false)
		c.tr.wake()
	})
}
