package fibril

// Coalesced single acks: Msg.AckAsync does not write its own ACK command.
// It queues the delivery on the Conn, and whichever comes first — the
// writer waking up, or any other command being sent — writes every queued
// ack as one ACK line (or as few as fit max_control_line). So a consumer
// that acks message by message sends one command per burst, not per
// message, and commands keep the order their callers issued them in (a
// command sent after an AckAsync is written after that ACK). When a shared
// line is refused, each of its deliveries is acked again on its own (an
// ACK of a settled delivery is +OK), so every future gets its own outcome.

import (
	"errors"
	"fmt"

	"github.com/fibrilmq/fibril/protocol"
)

// queuedAck is one AckAsync waiting to be written.
type queuedAck struct {
	m *Msg
	f *AckFuture
}

// queueAck queues m's ack and wakes the writer.
func (c *Conn) queueAck(m *Msg) *AckFuture {
	f := &AckFuture{done: make(chan struct{})}
	c.mu.Lock()
	if c.state == stateClosed {
		err := c.closeErr
		c.mu.Unlock()
		f.err = fmt.Errorf("fibril: ACK %s: %w", m.handle, err)
		close(f.done)
		return f
	}
	c.acks = append(c.acks, queuedAck{m, f})
	if t := c.tr; t != nil && len(c.acks) == 1 {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()
	return f
}

// flushAcksLocked writes the queued acks on t. Caller holds c.mu and t is
// the live transport.
func (c *Conn) flushAcksLocked(t *transport) {
	if len(c.acks) == 0 {
		return
	}
	queued := c.acks
	c.acks = nil
	limit := c.info.MaxControlLine
	if limit <= 0 {
		limit = protocol.DefaultMaxControlLine
	}
	msgs := make([]*Msg, len(queued))
	for i, q := range queued {
		msgs[i] = q.m
	}
	for len(queued) > 0 {
		n, line := ackLine(msgs, limit)
		group := queued[:n:n]
		r := newRequest(reqOK, line)
		r.then = func(r *request) { c.acksAnswered(group, r.err) }
		c.fifo = append(c.fifo, r)
		c.writeLocked(t, line)
		queued, msgs = queued[n:], msgs[n:]
	}
}

// acksAnswered completes the futures of one ACK line. A refusal of a
// shared line is sorted out by acking each delivery again on its own; a
// lost connection fails them all.
func (c *Conn) acksAnswered(group []queuedAck, err error) {
	var se *Error
	if err != nil && len(group) > 1 && errors.As(err, &se) {
		for _, q := range group {
			r := newRequest(reqOK, protocol.AppendAck(nil, q.m.h))
			r.then = func(r *request) { c.acksAnswered([]queuedAck{q}, r.err) }
			if err := c.send(r); err != nil {
				c.finish(r, err)
			}
		}
		return
	}
	for _, q := range group {
		if err == nil {
			q.m.done.Store(true)
		} else {
			q.f.err = fmt.Errorf("fibril: ACK %s: %w", q.m.handle, err)
		}
		close(q.f.done)
	}
}

// takeAcksLocked removes the queued acks, for closeWith to fail them once
// c.mu is released. Caller holds c.mu.
func (c *Conn) takeAcksLocked() []queuedAck {
	q := c.acks
	c.acks = nil
	return q
}
