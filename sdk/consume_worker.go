package fibril

// Consume's workers. Acks are pipelined and coalesced: a worker acks each
// message its handler finished with AckAsync at once, and the Conn writes
// the acks made in a burst as one ACK line when its writer next runs
// (ackcoalesce.go), so a busy consumer sends one ACK line per burst, never
// waits for the server's commit, and never holds a finished message's ack
// while it runs the next handler (a slow next handler would otherwise let
// that ack wait past the lease). Futures complete in order; each failure
// reaches the error handler with its own error, from the worker goroutine
// (never from the read loop).

import (
	"context"
	"time"
)

// pendingAck is one AckAsync of a worker and the message it settles.
type pendingAck struct {
	f *AckFuture
	m *Msg
}

func (c *Conn) consumeWorker(ctx context.Context, s *Subscription, handler Handler, o consumeOpts) error {
	var acks []pendingAck // sent, oldest first
	defer func() {
		// every ack is answered before Consume returns, even after ctx ended
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, a := range acks {
			if err := a.f.Wait(sctx); err != nil {
				o.onError(err)
			}
		}
	}()
	for {
		for len(acks) > 0 && isDone(acks[0].f.Done()) {
			if err := acks[0].f.Err(); err != nil {
				o.onError(err)
			}
			acks[0] = pendingAck{}
			acks = acks[1:]
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
			acks = append(acks, pendingAck{m.AckAsync(), m})
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
