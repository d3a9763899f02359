package queue

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"strings"
	"time"

	"github.com/fibrilmq/fibril/server/broker"
)

// Durability says when Publish returns: what a confirmed message survives.
type Durability = broker.Durability

// Durability policies, strongest first.
const (
	// DurabilitySync: each publish is fsynced before it returns; survives
	// a process crash and a power cut. Slowest.
	DurabilitySync = broker.DurabilitySync
	// DurabilityGroup (the default): the same promise as sync, but
	// concurrent publishes share one fsync, so many producers cost little
	// more than one.
	DurabilityGroup = broker.DurabilityGroup
	// DurabilityNone: a publish returns once written, without waiting for
	// an fsync. Fastest; the latest messages may be lost by a power cut
	// (segment log) or by any crash (boltstore). Acks are not fsynced
	// either.
	DurabilityNone = broker.DurabilityNone
)

// ReasonDecodeError is the Fibril-Reason of a message dead-lettered because
// the queue's Codec could not decode it; Fibril-Error holds the error text.
const ReasonDecodeError = "decode_error"

// Config configures a queue at Declare. The zero value is a durable queue of
// JSON values with one consumer group, "workers".
type Config[T any] struct {
	// Codec encodes and decodes values; default JSON (Bytes for []byte).
	Codec Codec[T]
	// Durability: default DurabilityGroup.
	Durability Durability
	// Partitions splits the queue for parallel writes; order holds within
	// a partition only. Default 1.
	Partitions int
	// Group names the consumer group the Queue consumes as; default
	// "workers". Declaring the same queue with another group gives every
	// group every message (fan-out).
	Group string
	// Lease is how long a fetched message stays with its consumer before it
	// is handed out again; default 30s, at least 1ms.
	Lease time.Duration
	// MaxDeliveries is how many deliveries a message gets before it is
	// dead-lettered; default 5, -1 for unlimited.
	MaxDeliveries int
	// DeadLetter names the queue dead letters go to; default
	// "$DLQ.<queue>.<group>". A typed queue always has one: undecodable
	// messages go there.
	DeadLetter string
	// MaxPending bounds the messages stored and not yet acked, and
	// MaxPendingBytes their bytes (0: no bound). Publish waits up to
	// BlockTimeout for room, then fails with ErrFull.
	MaxPending, MaxPendingBytes int64
	// BlockTimeout: default 5s.
	BlockTimeout time.Duration
}

// Queue is a durable at-least-once queue of T: Publish stores a value,
// Fetch, Messages and Consume lease values out, and each delivery is then
// acked (done), nacked (again, after a delay) or rejected (dead-lettered).
// A message whose lease runs out is delivered again. Safe for concurrent
// use.
type Queue[T any] struct {
	db    *DB
	t     *broker.Topic
	g     *broker.Group
	codec Codec[T]
	name  string
}

// Declare opens the queue called name in db, creating it the first time
// (with its dead-letter queue). A name is a subject without wildcards:
// tokens of letters, digits, '-' and '_' separated by dots. Declaring an
// existing queue again with the same configuration returns it; with
// another it fails with ErrMismatch (the stored configuration wins). Bad
// values fail with ErrInvalid, once, here.
func Declare[T any](db *DB, name string, cfg Config[T]) (*Queue[T], error) {
	tc, gc, err := cfg.engine(name)
	if err != nil {
		return nil, fmt.Errorf("declare %s: %w", name, err)
	}
	codec := cfg.Codec
	if codec == nil {
		codec = defaultCodec[T]()
	}
	if err := validCodec(codec); err != nil {
		return nil, fmt.Errorf("declare %s: %w", name, err)
	}
	if strings.HasPrefix(name, "$DLQ.") {
		if _, ok := any(codec).(bytesCodec); !ok {
			return nil, fmt.Errorf("declare %s: %w: a dead-letter queue holds raw bytes (use Queue.DeadLetters)", name, ErrInvalid)
		}
	}
	b := db.b
	t, ok := b.Topic(broker.TopicName(name))
	if !ok {
		t, err = b.CreateTopic(broker.TopicName(name), tc)
		if errors.Is(err, broker.ErrTopicExists) {
			t, ok = b.Topic(broker.TopicName(name))
			err = nil
			if !ok {
				err = broker.ErrNoTopic
			}
		}
		if err != nil {
			return nil, fmt.Errorf("declare %s: %w", name, err)
		}
	}
	want, err := tc.Resolve(broker.TopicName(name))
	if err != nil {
		return nil, fmt.Errorf("declare %s: %w", name, err)
	}
	if have := t.Config(); !sameTopic(have, want) {
		return nil, fmt.Errorf("declare %s: %w: stored %+v, asked %+v", name, ErrMismatch, have, want)
	}
	g, err := t.Group(broker.GroupName(gc.name), gc.cfg)
	if err != nil {
		return nil, fmt.Errorf("declare %s: %w", name, err)
	}
	wantG, err := gc.cfg.Resolve(broker.TopicName(name), broker.GroupName(gc.name))
	if err != nil {
		return nil, fmt.Errorf("declare %s: %w", name, err)
	}
	if have := g.Config(); !have.Equal(wantG) && !strings.HasPrefix(name, "$DLQ.") {
		return nil, fmt.Errorf("declare %s: group %s: %w: stored %+v, asked %+v", name, gc.name, ErrMismatch, have, wantG)
	}
	return &Queue[T]{db: db, t: t, g: g, codec: codec, name: name}, nil
}

type groupDecl struct {
	name string
	cfg  broker.GroupConfig
}

// engine turns the config into the engine's, checking what the engine
// does not (durations that are not whole milliseconds are rounded up).
func (c Config[T]) engine(name string) (broker.TopicConfig, groupDecl, error) {
	var zero groupDecl
	if c.Lease < 0 || c.BlockTimeout < 0 {
		return broker.TopicConfig{}, zero, fmt.Errorf("%w: negative Lease or BlockTimeout", ErrInvalid)
	}
	tc := broker.TopicConfig{
		Partitions: c.Partitions, Durability: c.Durability,
		MaxUnsettledMsgs: c.MaxPending, MaxUnsettledBytes: c.MaxPendingBytes,
		BlockTimeoutMs: ceilMs(c.BlockTimeout),
	}
	group := c.Group
	if group == "" {
		group = "workers"
	}
	dlq := strings.HasPrefix(name, "$DLQ.")
	if dlq {
		// The broker makes dead-letter topics without de-duplication (a
		// dead letter keeps its original's message id): declare it alike.
		off := int64(0)
		tc.DuplicateWindowMs = &off
	}
	if c.DeadLetter == "-" && !dlq {
		return tc, zero, fmt.Errorf("%w: a typed queue needs a dead-letter queue (undecodable messages go there)", ErrInvalid)
	}
	gc := broker.GroupConfig{LeaseMs: ceilMs(c.Lease), MaxDeliveries: c.MaxDeliveries, DeadLetter: c.DeadLetter}
	return tc, groupDecl{group, gc}, nil
}

func ceilMs(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

func sameTopic(a, b broker.TopicConfig) bool { return reflect.DeepEqual(a, b) }

// Name returns the queue's name.
func (q *Queue[T]) Name() string { return q.name }

// Group returns the consumer group the queue consumes as.
func (q *Queue[T]) Group() string { return string(q.g.Name()) }

// DeadLetterName returns the name of the queue its dead letters go to.
func (q *Queue[T]) DeadLetterName() string { return q.g.Config().DeadLetter }

// DeadLetters declares the queue's dead-letter queue as raw bytes, with
// the same group name: each delivery's Header gives why it is there
// (Fibril-Reason: max_deliveries, rejected or decode_error; Fibril-Error;
// Fibril-Subject, Fibril-Seq, Fibril-Deliveries). Its group never
// dead-letters and redelivers without limit.
func (q *Queue[T]) DeadLetters() (*Queue[[]byte], error) {
	name := q.DeadLetterName()
	if name == "-" {
		return nil, fmt.Errorf("%w: queue %s has no dead-letter queue", ErrInvalid, q.name)
	}
	tc := q.t.Config() // created by the engine after the source's
	dc, err := broker.TopicConfig{Durability: tc.Durability, Compression: tc.Compression}.Resolve(broker.TopicName(name))
	if err != nil {
		return nil, err
	}
	return Declare(q.db, name, Config[[]byte]{Durability: dc.Durability, Group: q.Group(),
		MaxDeliveries: -1, DeadLetter: "-"})
}

// Publish encodes v and stores it, returning once it is as durable as the
// queue's Durability says. It blocks while the queue is full (MaxPending,
// up to BlockTimeout: then ErrFull) or the engine's intake is, bounded by
// ctx. On error nothing was confirmed (after a timeout or a crash the
// message may still have been stored: at least once).
func (q *Queue[T]) Publish(ctx context.Context, v T) error {
	data, err := q.codec.Encode(v)
	if err != nil {
		return fmt.Errorf("publish to %s: encode: %w", q.name, err)
	}
	if _, err := q.t.Publish(ctx, broker.Message{Subject: q.name, Data: data}); err != nil {
		return fmt.Errorf("queue %s: %w", q.name, err)
	}
	return nil
}

// Fetch leases up to max messages, waiting until at least one is ready or
// ctx ends (then it returns ctx's error, wrapped). Each delivery must be
// settled (Ack, Nack, Reject) before its lease ends, or it is delivered
// again. A message the Codec cannot decode is never returned: it is copied
// to the dead-letter queue with Fibril-Reason: decode_error and the error
// text, then acked; if that fails, Fetch returns the error, gives the
// decoded messages back to the queue, and the undecodable one is delivered
// again once its lease ends.
func (q *Queue[T]) Fetch(ctx context.Context, max int) ([]*Delivery[T], error) {
	if max < 1 {
		return nil, fmt.Errorf("fetch from %s: %w: max %d < 1", q.name, ErrInvalid, max)
	}
	for {
		raw, err := q.g.Poll(ctx, max)
		if err != nil {
			return nil, fmt.Errorf("fetch from %s: %w", q.name, err)
		}
		out := make([]*Delivery[T], 0, len(raw))
		var dlqErr error
		for _, r := range raw {
			v, err := q.codec.Decode(r.Data)
			if err == nil {
				out = append(out, &Delivery[T]{Value: v, Attempt: int(r.Attempt), Time: r.Time, raw: r})
				continue
			}
			if dlqErr != nil {
				continue // left in flight: redelivered after its lease
			}
			if derr := r.DeadLetter(ctx, ReasonDecodeError, err.Error()); derr != nil {
				dlqErr = fmt.Errorf("fetch from %s: dead-letter undecodable %s (%v): %w", q.name, r.Handle, err, derr)
			}
		}
		if dlqErr != nil {
			q.giveBack(out)
			return nil, dlqErr
		}
		if len(out) > 0 {
			return out, nil
		}
	}
}

// giveBack nacks deliveries without delay: fetched, not processed.
func (q *Queue[T]) giveBack(ds []*Delivery[T]) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	for _, d := range ds {
		_ = d.Nack(ctx, 0) // on failure the lease runs out: delivered again all the same
	}
}

// Messages returns an iterator over the queue's deliveries, fetched 16 at
// a time: range over it and settle each. It ends when ctx ends (without an
// error) or after yielding a fetch error; leaving the loop early gives the
// fetched deliveries not yet yielded back to the queue at once.
func (q *Queue[T]) Messages(ctx context.Context) iter.Seq2[*Delivery[T], error] {
	return func(yield func(*Delivery[T], error) bool) {
		for {
			ds, err := q.Fetch(ctx, 16)
			if err != nil {
				if ctx.Err() == nil {
					yield(nil, err)
				}
				return
			}
			for i, d := range ds {
				if !yield(d, nil) || ctx.Err() != nil {
					q.giveBack(ds[i+1:])
					return
				}
			}
		}
	}
}

// Stats is a recent view of a queue's consumer group.
type Stats struct {
	// Ready: waiting for a consumer (nack delays included). InFlight:
	// leased now. Pending: stored and not settled, InFlight included.
	Ready, InFlight, Pending int64
	// Totals since the queue was declared.
	Delivered, Redelivered, Acked, Nacked, DeadLettered uint64
}

// Stats returns the queue's numbers after every settle and delivery
// answered before the call; it blocks on the engine, bounded by ctx.
func (q *Queue[T]) Stats(ctx context.Context) (Stats, error) {
	in, err := q.g.InfoCurrent(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("stats of %s: %w", q.name, err)
	}
	return Stats{Ready: in.Ready, InFlight: in.Inflight, Pending: in.Pending, Delivered: in.Delivered,
		Redelivered: in.Redelivered, Acked: in.Acked, Nacked: in.Nacked, DeadLettered: in.DeadLettered}, nil
}
