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
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/broker"
)

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
	if c.pollReserved > 0 && c.pendingLocked()+c.pollReserved+n > c.srv.opts.MaxPending {
		return false
	}
	c.pollReserved += n
	return true
}

// unreservePoll gives a POLL's reservation back (its answer is complete,
// and now counts as held output, or it failed).
func (c *client) unreservePoll(n int) {
	c.mu.Lock()
	c.pollReserved -= n
	c.mu.Unlock()
}

// pollRoomCheck is how often a POLL waiting for room looks again.
const pollRoomCheck = 5 * time.Millisecond

// waitPollRoom waits (on the lane) until reservePoll grants n bytes; it
// reports false when the connection closes first. A client that never
// reads is cut by the write deadline, which ends the wait.
func (c *client) waitPollRoom(n int) bool {
	t := time.NewTicker(pollRoomCheck)
	defer t.Stop()
	for !c.reservePoll(n) {
		select {
		case <-c.ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
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
func (c *client) addWriteAckLocked(h broker.Handle) {
	c.writeAcks = append(c.writeAcks, writeAck{end: c.taken + uint64(c.out.n), h: h})
}

// afterWrite is called by the owner after handing output to the
// transport: transportPending is what the transport still holds. It
// returns the ack-on-write deliveries now on the socket (to settle, in
// order) and whether the socket has taken nothing for WriteDeadline while
// output waited (the caller cuts the connection).
func (c *client) afterWrite(transportPending int, now time.Time) (settle []broker.Handle, stuck bool) {
	ns := now.UnixNano()
	c.mu.Lock()
	onSocket := c.taken - uint64(transportPending)
	moved := onSocket > c.onSocket
	switch {
	case transportPending == 0, c.outHigh == 0, onSocket > c.onSocket:
		// Empty, newly waiting, or moving: the deadline counts from now.
		c.progressAt = ns
	case ns-c.progressAt > int64(c.srv.opts.WriteDeadline):
		stuck = true
	}
	c.onSocket = onSocket
	c.outHigh = transportPending
	n := 0
	for n < len(c.writeAcks) && c.writeAcks[n].end <= onSocket {
		settle = append(settle, c.writeAcks[n].h)
		n++
	}
	if n > 0 {
		c.writeAcks = append(c.writeAcks[:0], c.writeAcks[n:]...)
	}
	// Deliveries to settle once on the socket, or output left in the
	// outbox past the transport's window, wait for the socket to take
	// more: nothing else would wake the owner for them.
	waiting := (len(c.writeAcks) > 0 || c.out.n > 0 && transportPending > 0) && !c.isClosing()
	c.outBusy.Store(transportPending > 0)
	c.mu.Unlock()
	if waiting {
		c.armDrainPoll(moved || n > 0)
	}
	return settle, stuck
}

// armDrainPoll makes sure a timer wakes the owner to settle ack-on-write
// deliveries that wait on the socket; progress resets its back-off.
func (c *client) armDrainPoll(progress bool) {
	if progress {
		c.drainBackoff.Store(int64(drainPollMin))
	}
	if !c.drainArmed.CompareAndSwap(false, true) {
		return
	}
	d := time.Duration(c.drainBackoff.Load())
	if d < drainPollMin {
		d = drainPollMin
	}
	c.drainBackoff.Store(int64(min(2*d, drainPollMax)))
	time.AfterFunc(d, func() {
		c.drainArmed.Store(false)
		c.tr.wake()
	})
}
