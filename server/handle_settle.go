package server

// SPEC.md "ACK", "NACK", "REJECT", "EXTEND" and "Settling by PUB to a
// handle": a PUB to a delivery's ack handle subject whose body says what to do (+ACK,
// -NAK, +WPI, +TERM), as JetStream clients ack. Every way a delivery is
// settled goes through settle, which checks that this identity may consume
// the handle's topic (SPEC.md 6.1); ack-on-write (nats_ack auto) settles
// once the delivery is on the socket (settleWritten).

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/stagetime"
)

// handleSettle answers ACK (one or more handles), NACK, REJECT, EXTEND
// with one +OK once every handle is settled, or the first error.
func (c *client) handleSettle(hs []protocol.Handle, op broker.SettleOp) {
	recv := c.stage.settle(c.srv.stages())
	c.srv.stages().Since(stagetime.AckParsed, recv)
	slot := c.reserve()
	own := append([]protocol.Handle(nil), hs...)
	op = op.As(c.principal())
	run := func(bool) {
		st := &settleState{c: c, slot: slot, recv: recv}
		st.left.Store(int64(len(own)))
		done := st.done // one method value per command, not per handle
		for _, wh := range own {
			h, ok := toBrokerHandle(wh)
			if !ok {
				done(broker.ErrUnknownHandle)
				continue
			}
			c.settle(h, op, done)
		}
	}
	if !c.serial(run) {
		c.laneFull(slot)
	}
}

// settle applies op (made As this connection's principal) to h once this
// connection may consume h's topic; done gets the outcome, always once.
func (c *client) settle(h broker.Handle, op broker.SettleOp, done func(error)) {
	b := c.srv.durable.b
	if c.mayForward() {
		if t, served, ok := b.HandleServed(h); ok && !served {
			if err := c.login.perms.ConsumeTopic(accessTopic(t)); err != nil {
				done(err)
				return
			}
			c.forwardSettle(t, h, op, done)
			return
		}
	}
	if c.login.perms.AllSubjects() {
		if err := b.Settle(h, op, done); err != nil {
			done(err)
		}
		return
	}
	t, ok := b.TopicByID(h.Topic)
	if !ok {
		done(fmt.Errorf("%w: topic id %d", broker.ErrUnknownHandle, h.Topic))
		return
	}
	if err := c.login.perms.ConsumeTopic(accessTopic(t)); err != nil {
		done(err)
		return
	}
	if err := b.Settle(h, op, done); err != nil {
		done(err)
	}
}

// settleState gathers the results of one settle command's handles, which
// partition actors report concurrently: a count, and a lock only for a
// failure (an ACK of many handles costs the actors no lock per handle).
type settleState struct {
	c     *client
	slot  *answer
	recv  int64 // the stage-accounting origin (stages.go; 0: not sampled)
	left  atomic.Int64
	mu    sync.Mutex
	first error
}

func (st *settleState) done(err error) {
	if err != nil {
		st.mu.Lock()
		if st.first == nil {
			st.first = err
		}
		st.mu.Unlock()
	}
	if st.left.Add(-1) != 0 {
		return
	}
	st.mu.Lock()
	first := st.first
	st.mu.Unlock()
	if first != nil {
		st.c.complete(st.slot, st.c.errAnswer(first))
		return
	}
	st.c.srv.stages().Since(stagetime.AckDurable, st.recv)
	st.c.complete(st.slot, okLine)
}

// settleByPub handles a PUB to an ack handle subject: the body says what
// to do (+ACK, -NAK [{"delay":ns}], +WPI, +TERM), as in JetStream.
func (c *client) settleByPub(m *pubMsg) {
	d := c.srv.durable
	if d == nil {
		c.reject(protocol.CodeUnknownHandle, "no durable engine")
		return
	}
	wh, err := protocol.ParseHandle([]byte(m.subject))
	if err != nil {
		c.reject(protocol.CodeInvalidHandle, err.Error())
		return
	}
	h, ok := toBrokerHandle(wh)
	if !ok {
		c.reject(protocol.CodeUnknownHandle, m.subject)
		return
	}
	kind, delay, err := protocol.ParseAckBody(m.body[m.hdrLen:])
	if err != nil {
		c.reject(protocol.CodeInvalidAck, "")
		return
	}
	op := ackBodyOp(kind, delay)
	var slot *answer
	if c.confirming() {
		slot = c.reserve()
	} else {
		c.ok()
	}
	reply := m.reply
	done := func(err error) {
		if err != nil {
			c.log.Debug("settle by publish failed", "handle", wh.String(), "err", err)
		}
		if slot != nil {
			if err != nil {
				c.complete(slot, c.errAnswer(err))
			} else {
				c.complete(slot, okNone)
			}
		}
		if reply != "" {
			// JetStream's double ack: empty on success, "<code> <text>" on failure.
			var body []byte
			if err != nil {
				body = []byte(protocol.NewError(codeOf(err), "").Text())
			}
			c.queueReply(reply, body)
		}
	}
	c.settle(h, op.As(c.principal()), done)
}

// settleWritten acks deliveries whose bytes are on the socket. The engine
// never refuses a settle for a full ring (it takes its control path then),
// so an ack is lost only when the engine stops (the message is then
// redelivered after restart) or the lease ran out first (redelivered, as
// at-most-once cannot promise more); both are logged, never silent.
func (c *client) settleWritten(hs []broker.Handle) {
	if len(hs) == 0 || c.srv.durable == nil {
		return
	}
	for _, h := range hs {
		if c.mayForward() {
			if t, served, ok := c.srv.durable.b.HandleServed(h); ok && !served {
				c.forwardSettle(t, h, broker.Ack(), c.ackOnWriteDone) // a forwarded delivery
				continue
			}
		}
		if err := c.srv.durable.b.Settle(h, broker.Ack(), c.ackOnWriteDone); err != nil {
			c.ackOnWriteDone(err)
		}
	}
}

// ackOnWriteDone reports an ack-on-write the engine did not apply.
func (c *client) ackOnWriteDone(err error) {
	switch {
	case err == nil:
	case errors.Is(err, broker.ErrClosed):
		c.log.Debug("ack-on-write after engine stop", "err", err)
	default:
		c.log.Warn("ack-on-write not applied: the message will be redelivered", "err", err)
	}
}

// ackBodyOp is the settle a body published to an ack subject asks for
// (protocol.ParseAckBody): settle by publishing (+ACK to a Fibril handle)
// and JetStream's $JS.ACK subjects share it.
func ackBodyOp(kind protocol.AckKind, delayNanos int64) broker.SettleOp {
	switch kind {
	case protocol.AckNak:
		return broker.Nack(time.Duration(delayNanos))
	case protocol.AckProgress:
		return broker.Extend(0)
	case protocol.AckTerm:
		return broker.Reject()
	default: // protocol.AckAck
		return broker.Ack()
	}
}
