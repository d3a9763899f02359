package fibril

// Requests and strict answers (SPEC.md section 4): every command is queued in
// the Conn's fifo in the order it is written, and each answer completes the
// oldest one.

import (
	"context"
	"sync/atomic"
	"time"
)

// requestKind says what answer a request expects.
type requestKind uint8

const (
	reqPub  requestKind = iota + 1 // +OK <p>:<seq> | +OK - | -ERR
	reqOK                          // +OK | -ERR (ACK, NACK, SUB, ...)
	reqPing                        // PONG
	reqPoll                        // MSG* then +OK <n>
	reqJSON                        // +OK <json> | -ERR
	reqSub                         // +OK for a re-subscription; errors are logged
)

// request is one command awaiting its answer.
type request struct {
	kind  requestKind
	frame []byte       // the encoded command, kept for replay until answered
	done  signal       // fires when finished
	state atomic.Int32 // 0 pending, 1 finished, 2 abandoned by its caller

	// results, written once before done fires
	err     error
	arg     string   // the +OK argument (not for publishes: see pos)
	pos     Position // a publish's confirm, parsed by the read loop
	posErr  error    // the confirm did not parse
	msgs    []*Msg
	corrupt []error
	window  bool   // holds a c.window token
	seq     uint64 // send order (Conn.sendSeq), kept across resends

	// publishes only: ctx is PublishAsync's, which bounds not_leader
	// resends (notleader.go); nl is set at the first not_leader
	ctx context.Context
	nl  *notLeaderState

	// POLL only: when its wait ends; until then (and a heartbeat more) a
	// missing PONG is no sign of a dead server (see heartbeatLoop)
	waitUntil time.Time

	// then, when set, runs once r is finished (on the goroutine that
	// finished it: the read loop, or whoever failed it); it must be quick
	then func(*request)
}

func newRequest(kind requestKind, frame []byte) *request {
	return &request{kind: kind, frame: frame}
}

// send queues r (writing it now when connected, keeping it for after the
// reconnect otherwise).
func (c *Conn) send(r *request) error {
	_, err := c.sendAll([]*request{r})
	return err
}

// sendAll queues rs in order, as send does, under one lock (so that they
// are written together). It returns how many were queued and, when not all
// were, why.
func (c *Conn) sendAll(rs []*request) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, r := range rs {
		c.sendSeq++
		r.seq = c.sendSeq
		switch c.state {
		case stateClosed:
			return i, c.closeErr
		case stateReconnecting:
			if c.replayBytes+len(r.frame) > c.cfg.reconnect.BufferBytes {
				return i, ErrReconnectBufferFull
			}
			c.replayBytes += len(r.frame)
			c.fifo = append(c.fifo, r)
			continue
		}
		c.flushAcksLocked(c.tr) // queued acks go first: they were issued first
		c.fifo = append(c.fifo, r)
		c.writeLocked(c.tr, r.frame)
	}
	return len(rs), nil
}

// wait blocks until r is answered or ctx is done. When ctx wins, r is marked
// abandoned so that its answer (leased messages) is cleaned up on arrival.
func (c *Conn) wait(ctx context.Context, r *request) error {
	if c.cfg.reqTimeout > 0 {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.cfg.reqTimeout)
			defer cancel()
		}
	}
	select {
	case <-r.done.wait():
		return r.err
	case <-ctx.Done():
		if r.state.CompareAndSwap(0, 2) {
			return ctx.Err()
		}
		<-r.done.wait() // finished concurrently: take the answer
		return r.err
	}
}

// roundTrip sends one command and waits for its answer.
func (c *Conn) roundTrip(ctx context.Context, kind requestKind, frame []byte) (*request, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := newRequest(kind, frame)
	if err := c.send(r); err != nil {
		return nil, err
	}
	if err := c.wait(ctx, r); err != nil {
		return r, err
	}
	return r, nil
}

// finish completes r with err (nil for success). Called exactly once per
// request, by whoever removed it from the fifo.
func (c *Conn) finish(r *request, err error) {
	if c.retire(r) {
		c.window.release(1)
	}
	c.fire(r, err)
}

// retire is the first half of finish: r was answered, so it is never
// replayed again and the encoded command (a publish's whole payload) need
// not outlive it in a PubFuture; a publish's goes back to the frame pool,
// before its window token, so that the publish the token lets in can reuse
// it. It reports whether r holds a window token, which the caller gives
// back before fire (the read loop gives back a whole read's at once).
func (c *Conn) retire(r *request) (token bool) {
	if r.window {
		c.recycleFrame(r.frame)
		token = true
	}
	r.frame, r.ctx = nil, nil
	return token
}

// fire is the second half of finish: it records err and wakes r's waiter,
// or releases what an abandoned r's caller will never see.
func (c *Conn) fire(r *request, err error) {
	r.err = err
	if r.state.CompareAndSwap(0, 1) {
		r.done.fire()
	} else {
		// abandoned: release what its caller will never see
		r.done.fire()
		for _, m := range r.msgs {
			c.releaseAsync(m)
		}
	}
	if r.then != nil {
		r.then(r)
	}
}
