package fibril

// Settling answers in batches. A group commit on the server confirms up to
// a whole publish window at once, so one read of the socket often holds
// hundreds of +OKs, and a POLL's answer hundreds of deliveries. The read
// loop keeps the answers and sid-0 deliveries of one read in an
// answerBatch and settles them together: the fifo is locked once for all
// of them, the window tokens of their publishes go back in one release
// (waking a blocked publisher once), then each request is completed; a
// delivery goes to the POLL at the head of the fifo once the answers
// before it in the batch have taken their requests. A batch is settled
// before any other frame is handled, before the connection is given up,
// and when it is full. Deliveries to a
// subscription (sid > 0) are not batched: they settle the batch first.

import (
	"fmt"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// maxAnswerBatch bounds an answerBatch: past it the batch is settled at
// once. A read of 128 KiB can hold a few thousand confirms; settling every
// 64 keeps a publisher blocked on the window fed while the rest of the
// read is parsed (the lock is still taken once per 64, not per answer).
const maxAnswerBatch = 64

// answer is one answer frame, copied out of the reader's reused frame;
// text is borrowed from the read buffer, valid until the reader's next
// fill (settle runs before it). A delivery for the POLL at the head of the
// fifo (sid 0) is kept in the batch too, with kind fMsg, so that the
// deliveries of a read are handed to their POLL under the same lock as
// the read's answers, in order.
type answer struct {
	kind frameKind // fOK, fErr, fPong, or fMsg (a sid-0 delivery)
	text []byte    // +OK argument
	arg  string    // -ERR text
	m    *Msg      // fMsg: the delivery
	bad  error     // fMsg: why the delivery is refused (it is nacked), or nil
}

// answerBatch is the read loop's answers not yet settled, with the
// scratch space of settling them. It belongs to one read loop.
type answerBatch struct {
	a       []answer
	rs      []*request // the requests answered, in order
	ans     []int      // the index in a of each one's answer
	errs    []error
	release []*Msg     // refused deliveries to nack once settled
	held    []*request // publishes answered not_leader, to resend (notleader.go)
}

// add keeps f's answer; it reports whether the batch is full.
func (b *answerBatch) add(f *frame) (full bool) {
	b.a = append(b.a, answer{kind: f.kind, text: f.text, arg: f.arg})
	return len(b.a) >= maxAnswerBatch
}

// addDelivery keeps a sid-0 delivery; it reports whether the batch is full.
func (b *answerBatch) addDelivery(m *Msg, bad error) (full bool) {
	b.a = append(b.a, answer{kind: fMsg, m: m, bad: bad})
	return len(b.a) >= maxAnswerBatch
}

// settle hands the sid-0 deliveries of b to the POLLs they answer and
// completes the oldest requests of the fifo with the answers of b, in
// order, and empties b. It returns a protocol error (the connection is
// then given up) for an answer or a delivery no request can take.
func (c *Conn) settle(t *transport, b *answerBatch) error {
	if len(b.a) == 0 {
		return nil
	}
	defer b.reset()
	var stepErr error  // a delivery out of step: after the answers before it
	extra := b.a[:0:0] // answers with no request pending
	c.mu.Lock()
	if c.tr != t {
		c.mu.Unlock()
		return nil
	}
	t.pingsOut = 0
	k := 0 // fifo entries answered so far: c.fifo[k] is the head after them
	for i := range b.a {
		e := &b.a[i]
		if e.kind == fMsg {
			if k >= len(c.fifo) || c.fifo[k].kind != reqPoll {
				stepErr = fmt.Errorf("%w: sid 0 delivery with no POLL pending", ErrProtocol)
				break // the stream is out of step: nothing after it counts
			}
			if r := c.fifo[k]; e.bad != nil {
				r.corrupt = append(r.corrupt, e.bad)
				b.release = append(b.release, e.m)
			} else {
				r.msgs = append(r.msgs, e.m)
			}
			continue
		}
		if k < len(c.fifo) {
			b.rs = append(b.rs, c.fifo[k])
			b.ans = append(b.ans, i)
			k++
		} else {
			extra = b.a[i:]
			break
		}
	}
	clear(c.fifo[:k])
	c.fifo = c.fifo[k:]
	c.mu.Unlock()

	var protoErr error
	b.errs = b.errs[:0]
	for i, r := range b.rs {
		err, perr := takeAnswer(r, &b.a[b.ans[i]])
		if err != nil && r.kind == reqSub {
			c.cfg.logger.Error("fibril: re-subscribe refused", "err", err)
		}
		if perr != nil && protoErr == nil {
			protoErr = perr
		}
		if protoErr != nil {
			err = protoErr // the stream is out of step from here on
		}
		b.errs = append(b.errs, err)
	}
	tokens := 0
	var now time.Time
	for i, r := range b.rs {
		if err := b.errs[i]; err != nil && err != protoErr && r.kind == reqPub {
			if now.IsZero() {
				now = time.Now()
			}
			if c.resendable(r, err, now) {
				// answered not_leader: held for a resend, not finished
				b.held = append(b.held, r)
				b.rs[i] = nil
				continue
			}
		}
		if c.retire(r) {
			tokens++
		}
	}
	c.window.release(tokens)
	if len(b.held) > 0 {
		// before the answers after them fire: a Flush (Drain) answered in
		// this batch must find them held
		c.hold(b.held)
	}
	for i, r := range b.rs {
		if r != nil {
			c.fire(r, b.errs[i])
		}
	}
	for _, m := range b.release {
		c.releaseAsync(m)
	}
	if protoErr != nil {
		return protoErr
	}
	if stepErr != nil {
		return stepErr
	}
	for _, a := range extra {
		switch a.kind {
		case fErr:
			c.cfg.logger.Warn("fibril: server error", "err", protocol.ParseErrText([]byte(a.arg)))
			// a fatal one is followed by the server closing
		case fMsg:
			return fmt.Errorf("%w: sid 0 delivery with no POLL pending", ErrProtocol)
		default:
			return fmt.Errorf("%w: answer with no request pending", ErrProtocol)
		}
	}
	return nil
}

// takeAnswer records a's result in r: the error to complete r with, or a
// protocol error when a cannot answer r.
func takeAnswer(r *request, a *answer) (err, protoErr error) {
	if a.kind == fErr {
		perr := protocol.ParseErrText([]byte(a.arg))
		return perr, nil
	}
	switch r.kind {
	case reqPing:
		if a.kind != fPong {
			return nil, fmt.Errorf("%w: PING answered by %v", ErrProtocol, a.kind)
		}
	default:
		if a.kind != fOK {
			return nil, fmt.Errorf("%w: request answered by PONG", ErrProtocol)
		}
	}
	if r.kind == reqPub {
		r.pos, r.posErr = parseOKPosition(a.text)
	} else {
		r.arg = string(a.text)
	}
	return nil, nil
}

func (b *answerBatch) reset() {
	clear(b.a) // no borrowed text, delivery or request outlives the settling
	clear(b.rs)
	clear(b.errs)
	clear(b.release)
	clear(b.held)
	b.a, b.rs, b.ans, b.errs, b.release, b.held = b.a[:0], b.rs[:0], b.ans[:0], b.errs[:0], b.release[:0], b.held[:0]
}
