package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// maxFetch bounds one fetch of Consume.
const maxFetch = 64

// Consume runs handler on at most workers goroutines, one delivery each,
// until ctx ends; then it stops fetching, waits for every running handler
// and returns nil. A handler's result settles its delivery: nil acks it,
// an error from RetryAfter nacks it with that delay, one from Reject
// dead-letters it, any other error nacks it for delivery again at once.
// A handler may settle (or Extend) the delivery itself; its result is then
// ignored.
//
// Graceful shutdown: cancel ctx. Handlers see their ctx end; what they
// finish is acked, and what they give up (return an error) goes back to
// the queue at once, so another consumer or the next start takes it
// without waiting for the lease. Settles after ctx ended use a context of
// their own (bounded by 10s).
//
// Consume returns a fetch error other than ctx's at once (after the running
// handlers return), and ErrInvalid for workers < 1 or a nil handler.
func (q *Queue[T]) Consume(ctx context.Context, workers int, handler func(context.Context, *Delivery[T]) error) error {
	if workers < 1 || handler == nil {
		return fmt.Errorf("consume %s: %w: %d workers, handler set %v", q.name, ErrInvalid, workers, handler != nil)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	free := make(chan struct{}, workers) // a token per idle worker
	for range workers {
		free <- struct{}{}
	}
	settleCtx := context.WithoutCancel(ctx)
	for {
		select { // one idle worker at least, then all that are idle
		case <-free:
		case <-ctx.Done():
			return nil
		}
		n := 1
		for n < min(workers, maxFetch) {
			select {
			case <-free:
				n++
				continue
			default:
			}
			break
		}
		ds, err := q.Fetch(ctx, n)
		for range n - len(ds) {
			free <- struct{}{}
		}
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil
			}
			return fmt.Errorf("consume %s: %w", q.name, err)
		}
		for _, d := range ds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { free <- struct{}{} }()
				herr := handler(ctx, d)
				sctx, cancel := context.WithTimeout(settleCtx, settleTimeout)
				defer cancel()
				if err := d.settleFor(sctx, herr); err != nil {
					q.db.logf("queue %s: settle %s after the handler: %v (delivered again when its lease ends)", q.name, d.ID(), err)
				}
			}()
		}
	}
}
