package fibril

// Settling answers in batches. A group commit on the server confirms up to
// a whole publish window at once, so one read of the socket often holds
// hundreds of +OKs. The read loop keeps the answers of one read in an
// answerBatch and settles them together: the fifo is locked once for all
// of them, the window tokens of their publishes go back in one release
// (waking a blocked publisher once), then each request is completed. A
// batch is settled before any other frame is handled (a sid-0 delivery
// goes to the POLL at the head of the fifo, which must be current), before
// the connection is given up, and when it is full.

import (
	"fmt"

	"github.com/fibrilmq/fibril/protocol"
)

// maxAnswerBatch bounds an answerBatch: past it the batch is settled at
// once (a read of 128 KiB holds at most a few thousand answers).
const maxAnswerBatch = 512

// answer is one answer frame, copied out of the reader's reused frame;
// text is borrowed from the read buffer, valid until the reader's next
// fill (settle runs before it).
type answer struct {
	kind frameKind // fOK, fErr or fPong
	text []byte    // +OK argument
	arg  string    // -ERR text
}

// answerBatch is the read loop's answers not yet settled, with the
// scratch space of settling them. It belongs to one read loop.
type answerBatch struct {
	a    []answer
	rs   []*request
	errs []error
}

// add keeps f's answer; it reports whether the batch is full.
func (b *answerBatch) add(f *frame) (full bool) {
	b.a = append(b.a, answer{kind: f.kind, text: f.text, arg: f.arg})
	return len(b.a) >= maxAnswerBatch
}

// settle completes the oldest requests of the fifo with the answers of b,
// in order, and empties b. It returns a protocol error (the connection is
// then given up) for an answer no request can take.
func (c *Conn) settle(t *transport, b *answerBatch) error {
	if len(b.a) == 0 {
		return nil
	}
	defer b.reset()
	c.mu.Lock()
	if c.tr != t {
		c.mu.Unlock()
		return nil
	}
	t.pingsOut = 0
	n := min(len(b.a), len(c.fifo))
	b.rs = append(b.rs[:0], c.fifo[:n]...)
	clear(c.fifo[:n])
	c.fifo = c.fifo[n:]
	c.mu.Unlock()

	var protoErr error
	b.errs = b.errs[:0]
	for i, r := range b.rs {
		err, perr := takeAnswer(r, &b.a[i])
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
	for _, r := range b.rs {
		if c.retire(r) {
			tokens++
		}
	}
	c.window.release(tokens)
	for i, r := range b.rs {
		c.fire(r, b.errs[i])
	}
	if protoErr != nil {
		return protoErr
	}
	for _, a := range b.a[n:] {
		if a.kind != fErr {
			return fmt.Errorf("%w: answer with no request pending", ErrProtocol)
		}
		c.cfg.logger.Warn("fibril: server error", "err", protocol.ParseErrText([]byte(a.arg)))
		// a fatal one is followed by the server closing
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
	clear(b.a) // no borrowed text or request outlives the settling
	clear(b.rs)
	clear(b.errs)
	b.a, b.rs, b.errs = b.a[:0], b.rs[:0], b.errs[:0]
}
