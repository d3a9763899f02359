package fibril

// Consume's workers. Acks are pipelined and batched: a worker collects the
// messages its handler finished and acknowledges them with one AckAllAsync
// as soon as no further message is waiting (or the batch is full, or
// ackBatchAge passed), so a busy consumer sends one ACK line per batch and
// never waits for the server's commit. Futures complete in order; a failed
// batch is acknowledged again one message at a time (an ACK of a settled
// delivery is +OK), so each failure reaches the error handler with its own
// error, from the worker goroutine (never from the read loop).

import (
	"context"
	"time"
)

const (
	ackBatchMax = 128                   // messages per batched ack
	ackBatchAge = 20 * time.Millisecond // the longest a finished message waits for its ack
)

// pendingAck is one AckAllAsync of a worker and the messages it settles.
type pendingAck struct {
	f    *AckFuture
	msgs []*Msg
}

func (c *Conn) consumeWorker(ctx context.Context, s *Subscription, handler Handler, o consumeOpts) error {
	var (
		acks      []pendingAck // sent, oldest first
		batch     []*Msg       // handled, ack not sent yet
		batchFrom time.Time    // when the first of batch was handled
	)
	flush := func() {
		if len(batch) > 0 {
			acks = append(acks, pendingAck{c.AckAllAsync(batch...), batch})
			batch = nil
		}
	}
	// reap reports the answered acks; a failed batch is retried message by
	// message so that every failure is reported with its own error.
	reap := func(a pendingAck, err error) {
		switch {
		case err == nil:
		case len(a.msgs) == 1:
			o.onError(err)
		default:
			for _, m := range a.msgs {
				acks = append(acks, pendingAck{m.AckAsync(), []*Msg{m}})
			}
		}
	}
	defer func() {
		// every ack is answered before Consume returns, even after ctx ended
		flush()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for len(acks) > 0 {
			a := acks[0]
			acks = acks[1:]
			reap(a, a.f.Wait(sctx))
		}
	}()
	for {
		for len(acks) > 0 && isDone(acks[0].f.Done()) {
			a := acks[0]
			acks[0] = pendingAck{}
			acks = acks[1:]
			reap(a, a.f.Err())
		}
		if len(batch) > 0 && (s.queued() == 0 || len(batch) >= ackBatchMax || time.Since(batchFrom) >= ackBatchAge) {
			flush()
		}
		var wake <-chan struct{} // report a failed ack without waiting for a message
		if len(acks) > 0 {
			wake = acks[0].f.Done()
		}
		it, ok, woke, err := s.nextOr(ctx, wake)
		if woke {
			continue
		}
		if !ok {
			return err
		}
		if it.err != nil {
			o.onError(it.err)
			continue
		}
		m := it.m
		stop := c.keepLeased(ctx, m, o)
		herr := handler(ctx, m)
		stop()
		if o.manual || m.settled() {
			continue
		}
		if herr == nil {
			if len(batch) == 0 {
				batchFrom = time.Now()
			}
			batch = append(batch, m)
			continue
		}
		// settle even if ctx was cancelled while the handler ran
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err = m.Nack(sctx, o.nackDelay)
		cancel()
		if err != nil {
			o.onError(err)
		}
	}
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
