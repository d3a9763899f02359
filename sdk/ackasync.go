package fibril

// Pipelined acknowledgements: the ACK lines are written at once and their
// answers (SPEC.md section 8, strict answers) complete a future later, so a
// consumer never waits for an ack's round trip (an ack is answered after
// the server has committed it, a group-committed fsync) before it asks for
// more.

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/fibrilmq/fibril/protocol"
)

// AckFuture is the pending outcome of AckAsync or AckAllAsync. It is safe
// for concurrent use.
type AckFuture struct {
	done chan struct{}
	err  error // written once before done is closed
}

// Done is closed when every ACK command of the future is answered (or
// failed).
func (f *AckFuture) Done() <-chan struct{} { return f.done }

// Err returns the outcome once Done is closed: nil when every delivery was
// acknowledged, else the error of the first ACK command that failed. Before
// Done is closed it returns ErrAckPending.
func (f *AckFuture) Err() error {
	select {
	case <-f.done:
		return f.err
	default:
		return ErrAckPending
	}
}

// Wait blocks until the acknowledgement is answered or ctx is done (the
// acknowledgement itself goes on); it returns Err, or ctx.Err().
func (f *AckFuture) Wait(ctx context.Context) error {
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func failedAck(err error) *AckFuture {
	f := &AckFuture{done: make(chan struct{}), err: err}
	close(f.done)
	return f
}

// ackBatch gathers the answers of the ACK commands of one future.
type ackBatch struct {
	f     *AckFuture
	lines [][]*Msg // the deliveries of each command, in send order
	errs  []error
	left  atomic.Int32
}

// AckAsync acknowledges m without waiting and returns its future at once.
// The outcome is Ack's (ErrStaleHandle when the delivery was superseded); m
// counts as settled once the future succeeds. Acks made in a burst share
// one ACK command: the ACK is written when the Conn's writer next runs, or
// before the next command sent on the Conn, whichever is first (so commands
// stay in the order they were issued). Answers come in command order, so
// an ACK written after a waiting POLL on the same Conn is answered after
// that POLL.
func (m *Msg) AckAsync() *AckFuture {
	if !m.hok || m.conn == nil {
		return failedAck(ErrNoHandle)
	}
	return m.conn.queueAck(m)
}

// AckAllAsync acknowledges msgs like AckAll, but returns at once: the ACK
// commands (as few as fit max_control_line) are written together and the
// future completes when all are answered. It never blocks; a failure to
// send (the Conn is closed, the reconnect buffer is full) or a delivery
// without a handle (ErrNoHandle, nothing is sent) is reported by the
// future. The deliveries of each command that succeeds count as settled.
func (c *Conn) AckAllAsync(msgs ...*Msg) *AckFuture {
	for _, m := range msgs {
		if !m.hok {
			return failedAck(ErrNoHandle)
		}
	}
	if len(msgs) == 0 {
		return failedAck(nil)
	}
	limit := c.Info().MaxControlLine
	if limit <= 0 {
		limit = protocol.DefaultMaxControlLine
	}
	b := &ackBatch{f: &AckFuture{done: make(chan struct{})}}
	var reqs []*request
	for rest := msgs; len(rest) > 0; {
		n, line := ackLine(rest, limit)
		r := newRequest(reqOK, line)
		r.then = b.answered(len(reqs))
		reqs = append(reqs, r)
		b.lines = append(b.lines, rest[:n])
		rest = rest[n:]
	}
	b.errs = make([]error, len(reqs))
	b.left.Store(int32(len(reqs)))
	sent, err := c.sendAll(reqs)
	for _, r := range reqs[sent:] {
		c.finish(r, err) // not sent: fail it so that the future completes
	}
	return b.f
}

// answered returns the completion of command i of b.
func (b *ackBatch) answered(i int) func(*request) {
	return func(r *request) {
		if r.err == nil {
			for _, m := range b.lines[i] {
				m.done.Store(true)
			}
		}
		b.errs[i] = r.err
		if b.left.Add(-1) > 0 {
			return
		}
		for j, err := range b.errs {
			if err != nil {
				b.f.err = fmt.Errorf("fibril: ACK of %d handles: %w", len(b.lines[j]), err)
				break
			}
		}
		close(b.f.done)
	}
}
