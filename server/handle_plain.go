package server

// SPEC.md "PUB/HPUB", "SUB", "UNSUB", "MSG/HMSG" for plain (non-durable)
// subscriptions: NATS core fan-out, at most once. Every matching plain
// subscription gets the message, except queue groups, where one member
// does. A connection whose output passes MaxPending is a slow consumer: the
// message is dropped, counted, and the connection is told and closed.

import (
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"sync/atomic"

	"github.com/fibrilmq/fibril/protocol"
)

// subscription is one SUB of one connection.
type subscription struct {
	c       *client
	subject string
	queue   string
	sid     string
	// max is the auto-unsubscribe count (0: none); delivered counts
	// deliveries to enforce it from any publisher's goroutine.
	max       atomic.Uint64
	delivered atomic.Uint64
	// durable is set when the SUB consumes a durable group instead of
	// joining the plain sublist.
	durable durableSub
}

// pubMsg is one published message while it is routed. Its slices are
// borrowed from the input buffer until the handler returns.
type pubMsg struct {
	subject string
	reply   string
	hdrLen  int // 0: no header block
	body    []byte
	crc     uint32
	crcSet  bool
}

func (m *pubMsg) sum() uint32 {
	if !m.crcSet {
		m.crc, m.crcSet = crc32.ChecksumIEEE(m.body), true
	}
	return m.crc
}

// fanOut delivers m to the matching plain subscriptions and reports how
// many received it.
func (c *client) fanOut(m *pubMsg) int {
	r := c.srv.subs.matchResult(m.subject)
	n := 0
	for _, s := range r.plain {
		if c.deliverPlain(s, m) {
			n++
		}
	}
	for _, members := range r.queues {
		if deliverOne(members, func(s *subscription) bool { return c.deliverPlain(s, m) }) {
			n++
		}
	}
	return n
}

// deliverOne hands a message to one member of a queue group, picked at
// random, trying the others if the pick is gone or full; it reports
// whether one took it.
func deliverOne(members []*subscription, deliver func(*subscription) bool) bool {
	start := rand.IntN(len(members))
	for i := range members {
		if deliver(members[(start+i)%len(members)]) {
			return true
		}
	}
	return false
}

// deliverPlain writes m to s's connection. It reports whether it did.
func (c *client) deliverPlain(s *subscription, m *pubMsg) bool {
	to := s.c
	if to == c && !c.modes.echo {
		return false
	}
	if limit := s.max.Load(); limit > 0 {
		n := s.delivered.Add(1)
		if n > limit {
			return false
		}
		if n == limit {
			defer to.removeSub(s)
		}
	}
	c.frameBuf = appendMsg(c.frameBuf[:0], m, s.sid, to.modes.crcOut.Load(), to.modes.headersOut.Load() || m.hdrLen == 0)
	ok, over := to.queueDeliveryMark(c.frameBuf, c)
	if !ok {
		return false
	}
	if over {
		c.stallOn(to) // the rest of this publisher's input waits (stall.go)
	}
	to.countOutMsgs(1)
	return true
}

// appendMsg encodes a MSG or HMSG frame with protocol's encoder. withHeaders
// false strips the header block for clients that did not enable headers
// (NATS does the same); the checksum is then the payload's alone.
func appendMsg(b []byte, m *pubMsg, sid string, crc, withHeaders bool) []byte {
	hdr, payload := m.body[:m.hdrLen], m.body[m.hdrLen:]
	tok := protocol.NoCRC
	if len(hdr) > 0 && !withHeaders {
		if crc {
			tok = protocol.ComputeCRC
		}
		return protocol.AppendMsg(b, m.subject, sid, m.reply, payload, tok)
	}
	if crc {
		tok = protocol.KnownCRC(m.sum()) // header block + payload, computed once per publish
	}
	if len(hdr) > 0 {
		return protocol.AppendHMsg(b, m.subject, sid, m.reply, hdr, payload, tok)
	}
	return protocol.AppendMsg(b, m.subject, sid, m.reply, payload, tok)
}

// queueDelivery appends an unsolicited delivery frame (copied) to the
// outbox unless that would pass MaxPending, in which case the connection
// is a slow consumer: the frame is dropped and the connection closed.
// Safe from any goroutine.
func (c *client) queueDelivery(frame []byte) bool {
	ok, _ := c.queueDeliveryMark(frame, nil)
	return ok
}

// queueDeliveryMark is queueDelivery that also reports whether the output
// is now over the stall mark (stall.go). With by, the publisher whose
// input goroutine calls it, the wake is left to by's feed (wakeLater).
func (c *client) queueDeliveryMark(frame []byte, by *client) (ok, overMark bool) {
	c.mu.Lock()
	if c.isClosing() {
		c.mu.Unlock()
		return false, false
	}
	if c.pendingLocked()+len(frame) > c.srv.opts.MaxPending {
		c.wr.dropped++
		c.mu.Unlock()
		c.slowConsumer(c.overReason())
		return false, false
	}
	c.appendOutLocked(frame)
	overMark = c.pendingLocked() > c.srv.opts.MaxPending/2
	w := c.markWakeLocked()
	c.mu.Unlock()
	if w && (by == nil || !by.wakeLater(c)) {
		c.tr.wake()
	}
	return true, overMark
}

// Wakes per read (as nats-server flushes the clients a read of the
// publisher delivered to once, when the read is parsed): a delivery from
// a publisher's input does not wake the subscriber at once but when the
// publisher's feed ends, so one read of the publisher carrying many
// messages costs each subscriber one wake and one write, not one per
// message its event loop happened to take in between. The subscriber's
// wake stays pending meanwhile (markWakeLocked), so nothing else wakes it
// either; a feed ends after at most one read's worth of frames.

// maxWakeLater bounds the subscribers one feed wakes at its end; past it
// they are woken at once.
const maxWakeLater = 1024

// wakeLater records to, whose wake is due, for the end of this feed
// (wakeDeliveries); false when the set is full. Input goroutine only.
func (c *client) wakeLater(to *client) bool {
	if len(c.wakeSet) >= maxWakeLater {
		return false
	}
	c.wakeSet = append(c.wakeSet, to)
	return true
}

// wakeDeliveries wakes the subscribers this feed delivered to. Input
// goroutine only.
func (c *client) wakeDeliveries() {
	for i, to := range c.wakeSet {
		to.tr.wake()
		c.wakeSet[i] = nil
	}
	c.wakeSet = c.wakeSet[:0]
}

// handleSub registers SUB subject [queue] sid [max-inflight].
func (c *client) handleSub(subject, queue, sid string, maxInflight int) {
	// A queue group is any token the parser accepted (SPEC.md 6, as in
	// NATS): it is compared as bytes, never matched as a subject.
	if !validFilter(subject) {
		c.reject(protocol.CodeInvalidSubject, "subject "+strconv.Quote(subject))
		return
	}
	if !c.canConsume(subject) {
		c.reject(protocol.CodePermissionDenied, "for Subscription to "+strconv.Quote(subject))
		return
	}
	c.mu.Lock()
	_, dup := c.subs[sid]
	count := len(c.subs)
	c.mu.Unlock()
	if dup {
		c.reject(protocol.CodeDuplicateSID, "sid "+strconv.Quote(sid))
		return
	}
	if count >= c.srv.opts.MaxSubsPerConn {
		c.reject(protocol.CodeMaxSubscriptions, "limit "+strconv.Itoa(c.srv.opts.MaxSubsPerConn))
		return
	}
	s := &subscription{c: c, subject: subject, queue: queue, sid: sid}
	if queue != "" && c.srv.durable != nil {
		// Durable group or plain queue group: decided in command order.
		slot := c.reserve()
		c.mu.Lock()
		c.subs[sid] = s
		c.mu.Unlock()
		var run laneFunc
		run = func(onLane bool) { c.subGroup(s, maxInflight, slot, onLane, run) }
		if !c.serial(run) {
			c.removeSub(s)
			c.laneFull(slot)
		}
		return
	}
	c.mu.Lock()
	c.subs[sid] = s
	c.mu.Unlock()
	c.srv.insertPlain(s)
	c.ok()
}

// insertPlain routes a plain subscription here and, in a cluster, from
// the other nodes (interest.go).
func (s *Server) insertPlain(sub *subscription) {
	s.subs.insert(sub)
	if s.cluster != nil {
		s.cluster.interest.add(sub)
	}
}

// handleUnsub removes sid now, or after max more deliveries.
func (c *client) handleUnsub(sid string, max uint64) {
	c.mu.Lock()
	s := c.subs[sid]
	durable := s != nil && s.durable != nil
	c.mu.Unlock()
	if s == nil {
		// NATS answers a missing sid with nothing; strict clients get +OK
		// too: the subscription is gone either way.
		c.ok()
		return
	}
	if max > 0 && !durable && s.delivered.Load() < max {
		s.max.Store(max)
		// A delivery may have raced past max between the check and the
		// store; removeSub is idempotent.
		if s.delivered.Load() >= max {
			c.removeSub(s)
		}
		c.ok()
		return
	}
	c.removeSub(s)
	c.ok()
}

// removeSub drops s from its connection and from routing. Idempotent; safe
// from any goroutine.
func (c *client) removeSub(s *subscription) {
	c.mu.Lock()
	cur, ok := c.subs[s.sid]
	if ok && cur == s {
		delete(c.subs, s.sid)
	}
	c.mu.Unlock()
	if ok && cur == s {
		c.srv.dropSub(s)
	}
}

// dropSub removes s from routing (plain sublist or durable engine).
func (s *Server) dropSub(sub *subscription) {
	if sub.durable != nil {
		sub.durable.stop()
		return
	}
	if s.subs.remove(sub) && s.cluster != nil {
		s.cluster.interest.remove(sub)
	}
}
