package server

// SPEC.md "POLL", "SUB" (durable groups), "ACK", "NACK", "REJECT",
// "EXTEND". Deliveries carry the ack handle in the reply-to slot. A POLL is
// answered by its deliveries (sid 0) and `+OK <n>` in its answer slot, so a
// waiting POLL holds back the answers of later commands. Push SUBs get
// unsolicited MSG frames, at most max-inflight unsettled at a time. Leases
// of a closed connection are released at once (Server.releaseDurable);
// deliveries that race the close are nacked without delay.
//
// Permissions (SPEC.md 6.1): consuming a topic (POLL, durable SUB) and
// settling its deliveries need consume rights over its name and every
// filter; a handle settles only for the identity it was delivered to.

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/stagetime"
)

// maxPollBatch caps one POLL's max so its answer stays bounded.
const maxPollBatch = 1024

// handleDurable dispatches the Fibril verbs (strict mode is checked).
func (c *client) handleDurable(cmd *protocol.Command) {
	if c.srv.durable == nil {
		c.reject(protocol.CodeInternal, cmd.Op.String()+": durable engine is off")
		return
	}
	switch cmd.Op {
	case protocol.OpPoll:
		c.handlePoll(string(cmd.Subject), string(cmd.Group), int(cmd.Max), cmd.Millis)
	case protocol.OpAck:
		c.handleSettle(cmd.Handles, broker.Ack())
	case protocol.OpNack:
		c.handleSettle(cmd.Handles, broker.Nack(time.Duration(cmd.Millis)*time.Millisecond))
	case protocol.OpReject:
		c.handleSettle(cmd.Handles, broker.Reject())
	case protocol.OpExtend:
		c.handleSettle(cmd.Handles, broker.Extend(time.Duration(cmd.Millis)*time.Millisecond))
	default:
		if cmd.Op.Management() {
			c.handleManage(cmd)
			return
		}
		c.reject(protocol.CodeUnknownOp, cmd.Op.String())
	}
}

// findGroup returns topic/group for consumption, creating the group when
// missing. Creation touches the disk, so off the lane it queues again (the
// lane is idle then, so again runs next) and reports groupDeferred; errors
// are answered in slot (groupFailed).
func (c *client) findGroup(topic, group string, slot *answer, onLane bool, again laneFunc) (*broker.Group, groupState) {
	t, ok := c.srv.durable.b.Topic(broker.TopicName(topic))
	hasGroup := false
	if ok {
		_, hasGroup = t.FindGroup(broker.GroupName(group))
	}
	if (!ok || !hasGroup) && c.srv.cluster != nil {
		// Made on another node a moment ago? Look again once this node
		// applied the catalog as committed now (on the lane: it waits).
		if !onLane {
			c.toLane(again)
			return nil, groupDeferred
		}
		if c.srv.catalogCaughtUp() {
			t, ok = c.srv.durable.b.Topic(broker.TopicName(topic))
		}
	}
	if !ok {
		c.complete(slot, c.errLine(protocol.CodeUnknownTopic, strconv.Quote(topic)))
		return nil, groupFailed
	}
	if err := c.login.perms.ConsumeTopic(accessTopic(t)); err != nil {
		c.complete(slot, c.errAnswer(err))
		return nil, groupFailed
	}
	if g, ok := t.FindGroup(broker.GroupName(group)); ok {
		return g, groupFound
	}
	if !c.srv.opts.AutoCreateGroups {
		c.complete(slot, c.errLine(protocol.CodeUnknownGroup, topic+"/"+group))
		return nil, groupFailed
	}
	if !onLane {
		c.toLane(again)
		return nil, groupDeferred
	}
	g, err := t.Group(broker.GroupName(group), broker.GroupConfig{})
	if err != nil {
		c.complete(slot, c.errAnswer(err))
		return nil, groupFailed
	}
	return g, groupFound
}

// groupState is what findGroup did.
type groupState uint8

const (
	groupFound    groupState = iota // the group is returned
	groupDeferred                   // queued on the lane; it will run again
	groupFailed                     // the error is answered
)

// handlePoll answers POLL topic group max [wait-ms].
func (c *client) handlePoll(topic, group string, max int, waitMS int64) {
	if !c.canConsume(topic) {
		c.reject(protocol.CodePermissionDenied, "for Subscription to "+strconv.Quote(topic))
		return
	}
	if max < 1 {
		c.reject(protocol.CodeInvalidArgs, "POLL max must be >= 1")
		return
	}
	max = min(max, maxPollBatch)
	wait := min(time.Duration(waitMS)*time.Millisecond, c.srv.opts.MaxPollWait)
	slot := c.reserve()
	crc, headers := c.modes.crcOut.Load(), c.modes.headersOut.Load() || c.modes.strict.Load()
	// Each POLL in progress reserves room for a whole answer under
	// max_pending (outbound.go); one that finds none waits on the lane, so
	// the POLLs a client pipelines without reading are never all
	// answered (leased, read, encoded) at once.
	budget := c.srv.opts.MaxPollBytes
	reserved := false
	var run laneFunc
	run = func(onLane bool) {
		if c.isClosing() {
			// Cut: a poll now would lease messages only to nack them,
			// spending one of their deliveries each time (pipelined POLLs
			// dead-lettered messages no consumer saw).
			if reserved {
				c.unreservePoll(budget)
			}
			return
		}
		if !reserved {
			if !c.reservePoll(budget) {
				if !onLane {
					c.toLane(run)
					return
				}
				if !c.waitPollRoom(budget) {
					return // closing: nothing to answer
				}
			}
			reserved = true
		}
		g, st := c.findGroup(topic, group, slot, onLane, run)
		if st == groupFailed {
			c.unreservePoll(budget)
		}
		if st != groupFound {
			return
		}
		if idx, remote := c.pollElsewhere(g.Topic()); remote {
			c.unreservePoll(budget)
			c.forwardPollTo(g.Topic(), idx, group, max, wait, slot, crc, headers)
			return
		}
		err := g.PollAsyncBytes(max, int64(budget), wait, c.owner(), func(ds []broker.Delivery, err error) {
			c.unreservePoll(budget)
			if err != nil && errors.Is(err, broker.ErrNotLeader) && c.mayForward() {
				c.forwardPoll(g.Topic(), group, max, wait, slot, crc, headers)
				return
			}
			if err != nil {
				c.complete(slot, c.errAnswer(err))
				return
			}
			if c.isClosing() {
				c.nackAll(ds)
				return
			}
			size := pollAnswerSize(ds)
			if c.wouldPassPending(size) {
				// Not even built: a client that pipelines POLLs and does
				// not read would have every answer allocated first.
				c.slowConsumer(c.overReason())
				c.nackAll(ds)
				return
			}
			c.countOutMsgs(len(ds))
			// Encoded in pooled chunks, handed over without a copy
			// (completeOwned).
			var q chunks
			for i := range ds {
				q.appendDelivery(&c.srv.outBufs, deliverySize(&ds[i]), &ds[i], "0", crc, headers)
			}
			q.commit(protocol.AppendPollDone(q.room(&c.srv.outBufs, pollDoneSize), len(ds)))
			if !c.completeOwned(slot, &q) {
				c.nackAll(ds) // cut or closing: back to ready at once
				return
			}
			if st := c.srv.stages(); st != nil && len(ds) > 0 {
				// one sample per answer: its first delivery, from its append
				st.Observe(stagetime.DeliveryWritten, time.Since(ds[0].Time))
			}
		})
		if err != nil {
			c.unreservePoll(budget)
			c.complete(slot, c.errAnswer(err))
		}
	}
	if !c.serial(run) {
		c.laneFull(slot)
	}
}

// pollAnswerSize bounds the bytes of a POLL answer carrying ds: per
// delivery the payload, header and subject, plus the frame's fixed words
// (verb, sid, handle, sizes, CRC token, line ends); then "+OK <n>".
func pollAnswerSize(ds []broker.Delivery) int {
	n := pollDoneSize
	for i := range ds {
		n += deliverySize(&ds[i])
	}
	return n
}

// pollDoneSize bounds "+OK <n>\r\n".
const pollDoneSize = 16

// deliverySize bounds the bytes of d's delivery frame.
func deliverySize(d *broker.Delivery) int {
	return len(d.Subject) + len(d.Header) + len(d.Data) + protocol.MaxHandleLen + frameOverhead
}

// frameOverhead bounds a delivery frame's bytes besides subject, handle,
// header and payload: "HMSG ", " 0 ", two sizes of up to 10 digits, a
// CRC token " xxxxxxxx", spaces and two CRLFs.
const frameOverhead = 48

// releaseLeasesNow gives the connection's leases back once, at once, from
// any goroutine (a partition actor included: ReleaseOwner only queues its
// work). release does it again at teardown; both are idempotent.
func (c *client) releaseLeasesNow() {
	if c.leasesGone.CompareAndSwap(false, true) {
		c.srv.releaseDurable(c)
	}
}

// nackAll gives deliveries that reached a closing connection back at once.
func (c *client) nackAll(ds []broker.Delivery) {
	for i := range ds {
		_ = c.srv.durable.b.Settle(ds[i].Handle, broker.Nack(0), nil)
	}
}

// pushSub is a SUB consuming a durable group by push. The engine's
// subscription is attached once the group is found or created.
type pushSub struct {
	mu      sync.Mutex
	s       *broker.Subscription
	remote  *remotePush // in a cluster: the partitions led elsewhere (forwarding.go)
	stopped bool
}

func (p *pushSub) stop() {
	p.mu.Lock()
	p.stopped = true
	s, r := p.s, p.remote
	p.mu.Unlock()
	if s != nil {
		s.Close()
	}
	if r != nil {
		r.stop()
	}
}

// attach sets the engine subscription; it reports false (and closes it)
// when the SUB was already stopped.
func (p *pushSub) attach(s *broker.Subscription) bool {
	p.mu.Lock()
	stopped := p.stopped
	if !stopped {
		p.s = s
	}
	p.mu.Unlock()
	if stopped {
		s.Close()
	}
	return !stopped
}

// subGroup binds SUB <topic> <group> <sid> [max-inflight]: to a durable
// group when a topic has that name, else to a plain queue group. sub is
// already in c.subs; slot is its answer. Fibril clients settle durable
// deliveries; other clients consume at most once: each delivery is acked as
// it is queued for writing.
func (c *client) subGroup(sub *subscription, maxInflight int, slot *answer, onLane bool, again laneFunc) {
	okAnswer := []byte(nil)
	if c.modes.strict.Load() || c.modes.opts.Verbose {
		okAnswer = okLine
	}
	b := c.srv.durable.b
	if _, ok := b.Topic(broker.TopicName(sub.subject)); !ok {
		// Plain queue group. Lock order: client.mu, then sublist.mu.
		c.mu.Lock()
		if c.subs[sub.sid] == sub {
			c.srv.insertPlain(sub)
		}
		c.mu.Unlock()
		c.complete(slot, okAnswer)
		return
	}
	g, st := c.findGroup(sub.subject, sub.queue, slot, onLane, again)
	if st == groupFailed {
		c.removeSub(sub)
	}
	if st != groupFound {
		return
	}
	if maxInflight <= 0 {
		maxInflight = c.srv.opts.MaxInflight
	}
	strict := c.modes.strict.Load()
	crc, headers := c.modes.crcOut.Load(), c.modes.headersOut.Load() || strict
	// SPEC.md 10.2: a group with nats_ack "explicit" leases deliveries to
	// NATS-mode clients too; they settle by publishing to the handle.
	explicit := g.Config().NATSAck == broker.NATSAckExplicit
	ps := &pushSub{}
	c.mu.Lock()
	if c.subs[sub.sid] != sub {
		// UNSUB or close came first (sub.durable was not set yet, so
		// nothing stopped it): do not subscribe at all.
		c.mu.Unlock()
		c.complete(slot, okAnswer)
		return
	}
	sub.durable = ps
	c.mu.Unlock()
	// Output stays bounded by credit and by MaxPending (outbound.go): a
	// Fibril client settles each delivery; for other clients (nats_ack
	// auto) a delivery is acked once it is on the socket, so its credit
	// returns only then.
	ackOnWrite := !strict && !explicit
	var pushed atomic.Uint64 // deliveries queued; every pushSampleEvery-th is a stage sample
	deliver := func(d broker.Delivery) {
		if !c.queueDurable(&d, sub.sid, crc, headers, ackOnWrite, slot) {
			// Closing (or just cut): this lease and the rest go back
			// through ReleaseOwner, whose work on this partition runs after
			// this round. A NACK would count the delivery against
			// max_deliveries, and the engine would go on delivering (and
			// the server nacking) until the subscription closed, until the
			// message was dead-lettered.
			c.releaseLeasesNow()
			return
		}
		c.countOutMsgs(1)
		if pushed.Add(1)%pushSampleEvery == 1 {
			c.srv.stages().Observe(stagetime.DeliveryWritten, time.Since(d.Time))
		}
	}
	bs, err := g.Subscribe(c.owner(), maxInflight, deliver)
	if err != nil {
		c.removeSub(sub)
		c.complete(slot, c.errAnswer(err))
		return
	}
	ps.attach(bs) // an UNSUB or close may have raced the subscribe
	if c.mayForward() {
		r := c.startRemotePush(g.Topic(), sub.queue, sub.sid, maxInflight, crc, headers, ackOnWrite, slot)
		ps.mu.Lock()
		ps.remote = r
		stopped := ps.stopped
		ps.mu.Unlock()
		if stopped {
			r.stop()
		}
	}
	c.complete(slot, okAnswer)
}

// queueDurable encodes a durable push delivery into the outbox unless the
// connection is closing or the delivery would put its output over
// MaxPending (the connection is then cut as a slow consumer). With
// ackOnWrite the delivery is acked once its bytes are on the socket
// (settled when written, outbound.go). Until the subscription's answer
// slot subOK is written, deliveries wait behind it. It reports false when
// the delivery was not queued (the caller gives it back). Safe from any
// goroutine.
func (c *client) queueDurable(d *broker.Delivery, sid string, crc, headers, ackOnWrite bool, subOK *answer) bool {
	size := deliverySize(d)
	if subOK != nil && !subOK.written.Load() {
		// The SUB's +OK may still wait in the answer queue: look again
		// under its lock, and queue behind it if so.
		if queued, held := c.holdBehind(subOK, d, size, sid, crc, headers, ackOnWrite); held {
			return queued
		}
	}
	c.mu.Lock()
	if c.isClosing() {
		c.mu.Unlock()
		return false
	}
	if c.overPendingLocked(size) {
		c.wr.dropped++
		c.mu.Unlock()
		c.slowConsumer(c.overReason())
		return false
	}
	c.wr.out.appendDelivery(&c.srv.outBufs, size, d, sid, crc, headers)
	if ackOnWrite {
		c.addWriteAckLocked(d.Handle)
	}
	w := c.markWakeLocked()
	c.mu.Unlock()
	if w {
		c.tr.wake()
	}
	return true
}

// holdBehind queues a durable push delivery behind subOK, its SUB's +OK,
// when that is not yet written (held true; queued as queueDurable
// reports). Once subOK is written it does nothing (held false): the
// delivery goes to the outbox.
func (c *client) holdBehind(subOK *answer, d *broker.Delivery, size int, sid string, crc, headers, ackOnWrite bool) (queued, held bool) {
	q := &c.answers
	q.mu.Lock()
	switch {
	case subOK.written.Load():
		q.mu.Unlock()
		return false, false
	case q.closed:
		q.mu.Unlock()
		return false, true
	}
	c.mu.Lock()
	over := c.overPendingLocked(size)
	if over {
		c.wr.dropped++
	}
	c.mu.Unlock()
	if over {
		q.mu.Unlock()
		c.slowConsumer(c.overReason()) // takes both locks to close
		return false, true
	}
	n := len(subOK.tail)
	subOK.tail = appendDelivery(subOK.tail, d, sid, crc, headers)
	q.holdTailLocked(len(subOK.tail) - n)
	if ackOnWrite {
		subOK.tailAcks = append(subOK.tailAcks, d.Handle)
	}
	q.mu.Unlock()
	return true, true
}
