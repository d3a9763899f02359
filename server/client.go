package server

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/stagetime"
)

// transport is what a client needs from the connection under it: the gnet
// connection or the TLS connection. Every method is safe from any goroutine.
type transport interface {
	// wake asks the owner to take the outbox (client.takeOut) and write
	// it soon; if the client is closing, the owner closes after writing.
	wake()
	// close is wake: closing is a state of the client (closeWith).
	close()
	// remoteAddr is for logs.
	remoteAddr() string
	// isTLS reports the TLS transport, whose reader goroutine may block
	// (a password check runs inline there, off any event loop).
	isTLS() bool
}

// client is the state of one connection, whichever transport carries it,
// built from owned parts, each declared next to the code that owns it:
// the lifecycle (conn_state.go), the modes CONNECT set and the login
// (handle_connect.go), liveness (heartbeat.go), the lane (lane.go), a
// publisher's stall (stall.go), the write side (outbound.go), the answer
// queue (answers.go) and the traffic counters (conns.go).
//
// Each part says which goroutine may touch each of its fields: the input
// goroutine (the gnet event loop owning the connection, or the TLS
// reader), any goroutine (atomics), or any goroutine under mu. mu is a
// leaf lock: nothing else is locked while it is held. The answer queue has
// its own lock, always taken before mu (answers.go).
type client struct {
	srv *Server
	id  uint64
	tr  transport
	// pollTurn picks the partition a forwarded POLL goes to (any
	// goroutine; forwarding.go).
	pollTurn atomic.Uint32
	log      *slog.Logger
	// ctx ends when the connection is torn down; waits on its behalf
	// (a blocked publish on the lane) use it.
	ctx    context.Context
	cancel context.CancelFunc

	state lifecycle // where the connection is in its life
	modes connModes // what CONNECT set
	login connLogin // who authenticated, and the password check's answer
	live  liveness  // input and PING times for the heartbeat

	// Input goroutine only.
	parser   *protocol.Parser
	stage    stageSample  // the stage-accounting sample of the current read (stages.go)
	frameBuf []byte       // scratch for encoding one frame
	subjects subjectCache // the strings of subjects published to
	wakeSet  []*client    // subscribers to wake when this feed ends (wakeLater)

	lane  laneState      // durable commands queued off the input goroutine
	stall publisherStall // a slow plain subscriber this publisher waits for

	// lingerUntil: unix nanos when a lingering close ends (linger.go); 0
	// while the connection is not half-closed.
	lingerUntil atomic.Int64
	leasesGone  atomic.Bool // releaseLeasesNow ran

	mu   sync.Mutex
	wr   writeSide                // output not yet on the socket, and its bounds
	subs map[string]*subscription // under mu
	meta connMeta                 // under mu: set at CONNECT, for the admin listing

	// answers: the answer slots in command order and the publish window,
	// under their own lock, taken before mu (answers.go).
	answers answerQueue

	traffic traffic // messages and bytes in and out
}

// newClient makes the state of a new connection: ready at once when
// authRequired is false, else waiting for CONNECT.
func newClient(s *Server, id uint64, tr transport, authRequired bool) *client {
	c := &client{
		srv:   s,
		id:    id,
		tr:    tr,
		modes: connModes{echo: true},
		subs:  make(map[string]*subscription),
	}
	c.parser = protocol.NewParser(protocol.ClientToServer, protocol.Limits{
		MaxControlLine: s.opts.MaxControlLine,
		MaxPayload:     s.opts.MaxPayload,
	})
	c.log = s.log.With("cid", id, "remote", tr.remoteAddr())
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.live.created = time.Now()
	c.live.lastIn.Store(c.live.created.UnixNano())
	if !authRequired {
		c.state.v.Store(uint32(stateReady))
	}
	return c
}

// queueOut appends b to the outbox and wakes the owner. It reports false
// when the connection is closing. Safe from any goroutine; b is copied.
func (c *client) queueOut(b []byte) bool {
	c.mu.Lock()
	if c.isClosing() {
		c.mu.Unlock()
		return false
	}
	// An answer written while earlier ones are outstanding would jump the
	// queue; callers that answer commands use reserve/complete instead.
	c.appendOutLocked(b)
	w := c.markWakeLocked()
	c.mu.Unlock()
	if w {
		c.tr.wake()
	}
	return true
}

// appendOutLocked copies b to the end of the outbox (c.mu held).
func (c *client) appendOutLocked(b []byte) {
	c.wr.out.write(&c.srv.outBufs, b)
}

// outboxLen is the bytes in the outbox. Safe from any goroutine.
func (c *client) outboxLen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wr.out.n
}

// markWakeLocked reports whether the caller must call tr.wake after
// unlocking (a wake is not already pending).
func (c *client) markWakeLocked() bool {
	if c.wr.wakePending {
		return false
	}
	c.wr.wakePending = true
	return true
}

// pendingLocked is the output held for this connection and not yet on the
// socket: the outbox, answers waiting behind earlier ones, and what the
// transport holds.
func (c *client) pendingLocked() int {
	return c.wr.out.n + c.wr.outHigh + int(c.answers.held.Load())
}

// reserve takes the next slot in the answer order. Input goroutine only.
func (c *client) reserve() *answer { return c.answers.reserve() }

// complete fills slot a with data and releases every answer that is now at
// the head of the order. Safe from any goroutine; data is copied.
func (c *client) complete(a *answer, data []byte) { c.fill(a, data, false) }

// fill is complete; confirm also reopens one place in the publish window,
// under the same lock. The outbox lock is taken only when answers can be
// written (a is at the head, or its filling made the head done).
func (c *client) fill(a *answer, data []byte, confirm bool) {
	q := &c.answers
	q.mu.Lock()
	if !q.fillLocked(a, data, confirm) {
		q.mu.Unlock()
		return
	}
	w := false
	if len(q.slots) > 0 && q.slots[0].done {
		c.mu.Lock()
		w = c.releaseLocked()
		c.mu.Unlock()
	}
	q.mu.Unlock()
	if w {
		c.tr.wake()
	}
}

// completeOwned is complete for output the caller built in chunks from
// c.srv.outBufs and hands over: its buffers are not copied but move to the
// outbox in turn, and own is empty after the call. A slot is completed
// once. It is for deliveries (a POLL answer): past MaxPending the
// connection is cut as a slow consumer and it reports false, as it does
// when the connection is closing; the caller's leases then go back with
// the connection's. Safe from any goroutine.
func (c *client) completeOwned(a *answer, own *chunks) bool {
	q := &c.answers
	q.mu.Lock()
	c.mu.Lock()
	if q.closed {
		c.mu.Unlock()
		q.mu.Unlock()
		own.release(&c.srv.outBufs)
		return false
	}
	if c.overPendingLocked(own.n) {
		c.mu.Unlock()
		q.mu.Unlock()
		own.release(&c.srv.outBufs)
		c.slowConsumer(c.overReason())
		return false
	}
	q.fillOwnedLocked(a, own)
	w := c.releaseLocked()
	c.mu.Unlock()
	q.mu.Unlock()
	if w {
		c.tr.wake()
	}
	return true
}

// releaseLocked moves every answer now at the head of the order to the
// outbox (c.answers.mu and c.mu held). It reports whether the caller must
// call tr.wake after unlocking.
func (c *client) releaseLocked() bool {
	q := &c.answers
	head := q.headLocked()
	if len(head) == 0 {
		return false
	}
	bytes := 0
	for _, h := range head {
		bytes += len(h.data) + h.own.n + len(h.tail)
		c.appendOutLocked(h.data)
		c.wr.out.moveFrom(&h.own)
		h.data = nil
		c.appendOutLocked(h.tail)
		for _, ah := range h.tailAcks {
			c.addWriteAckLocked(ah)
		}
		h.tail, h.tailAcks = nil, nil
		if h.recv != 0 {
			c.srv.stages().Since(stagetime.ConfirmWritten, h.recv)
			h.recv = 0
		}
		h.written.Store(true)
	}
	q.dropLocked(len(head), bytes)
	return c.markWakeLocked()
}

// answerNow answers a command whose reply is known at once, keeping the
// order behind answers still outstanding.
func (c *client) answerNow(data []byte) {
	c.complete(c.reserve(), data)
}

// outputOver reports whether the output held for this connection
// (outbox, held answers, transportPending) is over MaxPending; it records
// the answer for the ticker, which wakes stalled connections.
func (c *client) outputOver(transportPending int) bool {
	c.mu.Lock()
	over := c.wr.out.n+int(c.answers.held.Load())+transportPending > c.srv.opts.MaxPending
	c.mu.Unlock()
	c.wr.stalled.Store(over)
	return over
}

// beginInput marks a wake as pending while the owner parses input: the
// owner flushes right after, so answers queued meanwhile need no wake.
func (c *client) beginInput() {
	c.mu.Lock()
	c.wr.wakePending = true
	c.mu.Unlock()
}

// takeOut hands the outbox to the owner goroutine and clears the wake flag,
// so a later queueOut wakes the owner again: it appends the outbox's
// buffers to dst and returns them and their bytes. The owner writes them
// in order and gives them back (outBufs.putAll). After writing out the
// owner calls afterWrite, which settles the ack-on-write deliveries that
// reached the socket. It reports whether the connection must be closed
// after writing out.
//
// limit bounds the bytes taken (whole buffers, at least one; none when
// limit <= 0); what is left stays in the outbox, and the owner must come
// back for it (the drain poll: afterWrite). A closing connection is
// closed once the outbox is empty.
func (c *client) takeOut(dst [][]byte, limit int) (out [][]byte, n int, closeAfter bool) {
	c.mu.Lock()
	out, n = c.wr.out.takeUpTo(dst, limit)
	c.countOut(n)
	c.wr.taken += uint64(n)
	c.wr.wakePending = false
	closeAfter = c.isClosing()
	c.mu.Unlock()
	return out, n, closeAfter
}

// closeWith queues err (already encoded, may be nil) as the last bytes of
// the connection and asks the transport to close it. Safe from any goroutine.
func (c *client) closeWith(reason string, errLine []byte) {
	c.answers.mu.Lock()
	c.mu.Lock()
	if _, ok := c.state.to(stateClosing); !ok {
		c.mu.Unlock()
		c.answers.mu.Unlock()
		return // closing already
	}
	// Answers still outstanding are abandoned: the connection is going away.
	// Deliveries not on the socket are never settled: their leases go back.
	c.answers.closeLocked()
	c.wr.writeAcks = nil
	c.appendOutLocked(errLine)
	w := c.markWakeLocked()
	c.mu.Unlock()
	c.answers.mu.Unlock()
	c.log.Debug("closing connection", "reason", reason)
	if w {
		c.tr.wake()
	}
}

// isClosing reports whether the connection stopped accepting output
// (closing or later). Any goroutine; under c.mu the answer cannot change.
func (c *client) isClosing() bool { return c.state.load() >= stateClosing }

// isReady reports whether commands are served (authenticated, or no
// authentication, and not closing).
func (c *client) isReady() bool { return c.state.load() == stateReady }

// teardown is called by the transport when the socket is gone: it drops
// the connection's subscriptions and durable leases (release, if a
// lingering close did not already) and forgets the connection. Idempotent.
func (c *client) teardown() {
	if c.releaseTo(stateClosed) {
		c.srv.clientGone(c)
	}
}
