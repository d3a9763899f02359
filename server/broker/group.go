package broker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Group is a durable consumer group of a topic: every group sees every
// message (fan-out), consumers within a group compete for them. Its methods
// are safe for concurrent use.
type Group struct {
	t    *Topic
	id   GroupID
	name GroupName
	cfg  GroupConfig
	// parts[i] is the group's state in partition i; only that partition's
	// actor touches it, except its st* counters.
	parts []*groupPart
	// paused stops deliveries (Pause); persisted in the catalog.
	paused atomic.Bool
}

// Name returns the group's name.
func (g *Group) Name() GroupName { return g.name }

// ID returns the group's id (used in handles).
func (g *Group) ID() GroupID { return g.id }

// Topic returns the group's topic.
func (g *Group) Topic() *Topic { return g.t }

// Config returns the group's configuration with defaults filled in.
func (g *Group) Config() GroupConfig { return g.cfg }

// PollAsync asks for up to max ready messages. If none is ready it waits up
// to wait for the first (wait < 0: until one arrives; 0: answer at once).
// done is called exactly once, on an internal goroutine (a partition actor or
// the timeout), and must be quick and must not call blocking methods such as
// Delivery.Ack (use Broker.Settle); the deliveries' Subject, Header and Data
// are borrowed until it returns. Leases belong to owner (see ReleaseOwner).
// A poll gathers from every partition of the topic that has messages ready
// (waiting, if it must, only for the first); the deliveries of each
// partition are in order. PollAsync returns
// ErrQueueFull or ErrClosed at once (done is then never called).
func (g *Group) PollAsync(max int, wait time.Duration, owner OwnerID, done func([]Delivery, error)) error {
	_, err := g.pollAsync(max, 0, wait, owner, done)
	return err
}

// PollAsyncBytes is PollAsync that also stops adding messages once the
// answer holds maxBytes of subject, header and payload (0: no limit); it
// always delivers at least one message when one is ready, however big.
func (g *Group) PollAsyncBytes(max int, maxBytes int64, wait time.Duration, owner OwnerID, done func([]Delivery, error)) error {
	if maxBytes < 0 {
		return fmt.Errorf("%w: poll max bytes %d < 0", ErrInvalid, maxBytes)
	}
	_, err := g.pollAsync(max, maxBytes, wait, owner, done)
	return err
}

func (g *Group) pollAsync(max int, maxBytes int64, wait time.Duration, owner OwnerID, done func([]Delivery, error)) (*pollWaiter, error) {
	if max < 1 {
		return nil, fmt.Errorf("%w: poll max %d < 1", ErrInvalid, max)
	}
	w := &pollWaiter{group: g.id, max: max, maxBytes: maxBytes, owner: owner, holder: g.t.b.principalOf(owner), wait: wait != 0, parts: int32(len(g.t.parts)), done: done,
		relGen: g.t.b.relGen.Load()}
	if wait > 0 {
		w.stop = g.t.b.opts.Clock.AfterFunc(wait, func() {
			if w.claim() {
				w.done(nil, nil)
			}
		})
	}
	accepted := 0
	var lastErr error
	for _, p := range g.t.parts {
		c := command{kind: cmdPoll, poll: w}
		if err := p.push(&c); err != nil {
			lastErr = err
			w.declined.Add(1) // a partition we could not ask counts as empty
			continue
		}
		accepted++
	}
	if accepted == 0 {
		if w.claim() && w.stop != nil {
			w.stop()
		}
		return nil, fmt.Errorf("poll %s/%s: %w", g.t.name, g.name, lastErr)
	}
	return w, nil
}

// Poll returns up to max ready messages, waiting until at least one is ready
// or ctx ends (then it returns ctx's error and no messages). The deliveries
// are copies the caller owns; settle each with its Ack, Nack, Reject or
// Extend method, or through Broker.Settle.
func (g *Group) Poll(ctx context.Context, max int) ([]Delivery, error) {
	type result struct {
		ds  []Delivery
		err error
	}
	ch := make(chan result, 1)
	done := func(ds []Delivery, err error) {
		out := make([]Delivery, len(ds))
		for i, d := range ds {
			out[i] = d.clone()
		}
		ch <- result{out, err}
	}
	var w *pollWaiter
	var perr error
	err := g.t.parts[0].box.room.waitUntil(ctx, func() bool {
		w, perr = g.pollAsync(max, 0, -1, 0, done)
		return !errors.Is(perr, ErrQueueFull)
	})
	if err != nil {
		return nil, fmt.Errorf("poll %s/%s: %w", g.t.name, g.name, err)
	}
	if perr != nil {
		return nil, perr
	}
	select {
	case r := <-ch:
		return r.ds, r.err
	case <-ctx.Done():
		if w != nil && w.claim() {
			return nil, fmt.Errorf("poll %s/%s: %w", g.t.name, g.name, ctx.Err())
		}
		r := <-ch // a partition claimed it first: its answer is on the way
		return r.ds, r.err
	}
}

// Subscribe starts push delivery of the group's messages to deliver, with at
// most maxInFlight unsettled deliveries at a time. deliver runs on a
// partition actor goroutine and must be quick — it must not call blocking
// methods such as Delivery.Ack (use Broker.Settle); the Delivery's Subject,
// Header and Data are borrowed until it returns.
func (g *Group) Subscribe(owner OwnerID, maxInFlight int, deliver func(Delivery)) (*Subscription, error) {
	if maxInFlight < 1 {
		return nil, fmt.Errorf("%w: max in flight %d < 1", ErrInvalid, maxInFlight)
	}
	if deliver == nil {
		return nil, fmt.Errorf("%w: nil deliver", ErrInvalid)
	}
	s := &Subscription{g: g, owner: owner, holder: g.t.b.principalOf(owner), deliver: deliver}
	s.credit.Store(int64(maxInFlight))
	for _, p := range g.t.parts {
		if p.box.closed.Load() {
			return nil, fmt.Errorf("subscribe %s/%s: %w", g.t.name, g.name, ErrClosed)
		}
		gid := g.id
		p.control(func(p *partition) {
			if gp := p.groups[gid]; gp != nil && !s.closed.Load() {
				gp.subs = append(gp.subs, s)
			}
		})
	}
	return s, nil
}

// GroupInfo describes a group; numbers are a recent, not atomic, view.
type GroupInfo struct {
	Topic    TopicName   `json:"topic"`
	Name     GroupName   `json:"name"`
	ID       GroupID     `json:"id"`
	Config   GroupConfig `json:"config"`
	Pending  int64       `json:"pending"`  // retained and not settled, inflight included
	Inflight int64       `json:"inflight"` // leased now
	// Ready is Pending minus Inflight: waiting for a consumer (nack
	// delays included).
	Ready int64 `json:"ready"`
	// OldestUnackedMs is the age of the oldest message the group has not
	// settled, over all partitions (0: none).
	OldestUnackedMs int64 `json:"oldest_unacked_ms"`
	// Paused is true while the group is paused (see Group.Pause).
	Paused bool `json:"paused"`
	// GroupCounters are the totals over all partitions.
	GroupCounters
	// Partitions holds the same numbers per partition.
	Partitions []GroupPartitionInfo `json:"partitions"`
}

// Info returns the group's description without waiting for the actors.
func (g *Group) Info() GroupInfo {
	in := GroupInfo{Topic: g.t.name, Name: g.name, ID: g.id, Config: g.cfg, Paused: g.paused.Load()}
	now := g.t.b.opts.Clock.Now().UnixNano()
	for i, gp := range g.parts {
		if gp == nil {
			continue // not yet attached (creation under way)
		}
		pi := gp.info(Partition(i), now)
		in.Partitions = append(in.Partitions, pi)
		in.Pending += pi.Pending
		in.Inflight += pi.Inflight
		in.Ready += pi.Ready
		in.OldestUnackedMs = max(in.OldestUnackedMs, pi.OldestUnackedMs)
		in.GroupCounters.add(pi.GroupCounters)
	}
	return in
}

// InfoCurrent is Info after every partition's actor has published this
// group's numbers: everything answered before the call (deliveries, settle
// callbacks) is counted. It blocks on the actors, bounded by ctx; it fails
// with ErrClosed when the broker is stopping.
func (g *Group) InfoCurrent(ctx context.Context) (GroupInfo, error) {
	for i, gp := range g.parts {
		if gp == nil {
			continue
		}
		if err := g.t.onActor(ctx, Partition(i), func(p *partition) {
			if p.groups[g.id] == gp {
				p.publishGroupStats(gp)
			}
		}); err != nil {
			return GroupInfo{}, fmt.Errorf("group %s/%s info: %w", g.t.name, g.name, err)
		}
	}
	return g.Info(), nil
}

func (d Delivery) clone() Delivery {
	buf := make([]byte, len(d.Header)+len(d.Data))
	n := copy(buf, d.Header)
	copy(buf[n:], d.Data)
	if d.Header != nil {
		d.Header = buf[:n:n]
	}
	d.Data = buf[n:]
	return d
}

// Ack acknowledges the delivery (final). It waits for the answer or ctx.
func (d Delivery) Ack(ctx context.Context) error { return d.b.settleWait(ctx, d.Handle, Ack()) }

// Nack puts the delivery back, to be redelivered after delay.
func (d Delivery) Nack(ctx context.Context, delay time.Duration) error {
	return d.b.settleWait(ctx, d.Handle, Nack(delay))
}

// Reject dead-letters the delivery.
func (d Delivery) Reject(ctx context.Context) error { return d.b.settleWait(ctx, d.Handle, Reject()) }

// Extend extends the delivery's lease to now + by (the group's lease when 0).
func (d Delivery) Extend(ctx context.Context, by time.Duration) error {
	return d.b.settleWait(ctx, d.Handle, Extend(by))
}
