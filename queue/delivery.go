package queue

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/server/broker"
)

// settleTimeout bounds the settles a Queue makes on its own (giving back
// fetched messages, settling after a Consume handler), which must outlive
// the caller's cancelled context.
const settleTimeout = 10 * time.Second

// Delivery is one leased message of a Queue[T]. Settle it once with Ack,
// Nack or Reject; Extend keeps it longer. A settle of a delivery that was
// redelivered meanwhile (its lease ran out) fails with an error wrapping
// broker.ErrStaleHandle.
type Delivery[T any] struct {
	// Value is the decoded message; the delivery's own copy.
	Value T
	// Attempt counts deliveries of this message, from 1.
	Attempt int
	// Time is when the message was stored.
	Time time.Time

	raw     broker.Delivery
	settled atomic.Bool // set by the first settle call, for Consume
}

// Ack marks the message done: it is never delivered again. It returns once
// the ack is as durable as the queue's Durability says, bounded by ctx.
func (d *Delivery[T]) Ack(ctx context.Context) error {
	d.settled.Store(true)
	return wrapSettle("ack", d.raw.Ack(ctx))
}

// Nack gives the message back, to be delivered again after delay (0: at
// once). Once it has had Config.MaxDeliveries deliveries it is
// dead-lettered instead.
func (d *Delivery[T]) Nack(ctx context.Context, delay time.Duration) error {
	d.settled.Store(true)
	return wrapSettle("nack", d.raw.Nack(ctx, delay))
}

// Reject dead-letters the message at once (Fibril-Reason: rejected).
func (d *Delivery[T]) Reject(ctx context.Context) error {
	d.settled.Store(true)
	return wrapSettle("reject", d.raw.Reject(ctx))
}

// Extend pushes the lease's end to now + by (the queue's Lease when 0), for
// work that takes longer than a lease.
func (d *Delivery[T]) Extend(ctx context.Context, by time.Duration) error {
	return wrapSettle("extend", d.raw.Extend(ctx, by))
}

// ID names this delivery of this message ("$F.<topic>.<group>.<partition>.<seq>.<attempt>").
func (d *Delivery[T]) ID() string { return d.raw.Handle.String() }

// Data returns the message's stored bytes (what Value was decoded from);
// the delivery's own copy.
func (d *Delivery[T]) Data() []byte { return d.raw.Data }

// Header returns the value of the message's header line named key (case
// insensitive), or "". Dead letters carry Fibril-Reason, Fibril-Error,
// Fibril-Subject, Fibril-Seq and Fibril-Deliveries.
func (d *Delivery[T]) Header(key string) string { return broker.HeaderValue(d.raw.Header, key) }

func wrapSettle(op string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// RetryAfter wraps err for a Consume handler: the message is nacked and
// delivered again after delay (a delayed retry). errors.Is and As see err.
func RetryAfter(delay time.Duration, err error) error { return &retryError{delay: delay, err: err} }

// Reject wraps err for a Consume handler: the message is dead-lettered at
// once, without more attempts.
func Reject(err error) error { return &rejectError{err} }

type retryError struct {
	delay time.Duration
	err   error
}

func (e *retryError) Error() string { return fmt.Sprintf("retry after %v: %v", e.delay, e.err) }
func (e *retryError) Unwrap() error { return e.err }

type rejectError struct{ err error }

func (e *rejectError) Error() string { return "reject: " + e.err.Error() }
func (e *rejectError) Unwrap() error { return e.err }

// settleFor settles d as a handler's result says, unless the handler did.
func (d *Delivery[T]) settleFor(ctx context.Context, herr error) error {
	if d.settled.Load() {
		return nil
	}
	var re *retryError
	var rj *rejectError
	switch {
	case herr == nil:
		return d.Ack(ctx)
	case errors.As(herr, &rj):
		return d.Reject(ctx)
	case errors.As(herr, &re):
		return d.Nack(ctx, re.delay)
	default:
		return d.Nack(ctx, 0)
	}
}
