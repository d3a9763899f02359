package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/fibrilmq/fibril/wire"
)

// RequeueGroup is the group of a dead-letter topic through which Requeue
// takes dead letters (created on first use, starting at the earliest). It
// is internal: a name no client can give (the wire refuses '$' in group
// names), left out of Topic.Groups and TopicInfo.Groups, so a requeue
// leaves no group a user sees (it used to be a visible "requeue").
const RequeueGroup GroupName = "$requeue"

// internal reports a group the broker keeps for itself (its name starts
// with '$', which the wire refuses in group names).
func (n GroupName) internal() bool { return wire.IsReserved(n) }

// requeueBatch bounds one poll of a requeue.
const requeueBatch = 64

// Requeue moves up to max dead letters of the dead-letter topic dlq back to
// the topics that capture their Fibril-Subject header, through the group
// RequeueGroup of dlq: RequeueFrom(ctx, dlq, RequeueGroup, max).
func (b *Broker) Requeue(ctx context.Context, dlq TopicName, max int) (int, error) {
	return b.RequeueFrom(ctx, dlq, RequeueGroup, max)
}

// RequeueFrom moves up to max messages that are ready in group of topic dlq
// (created when missing) back to their original subject: each is published
// again — to the topic that now captures its Fibril-Subject header, keeping
// its other headers and its payload, minus the Fibril-Reason,
// Fibril-Subject, Fibril-Partition, Fibril-Seq and Fibril-Deliveries lines,
// with its Fibril-Key header as the partition key — and, once that publish
// is durable, acked in group. It returns how many moved. It stops at the
// first message it cannot move (no Fibril-Subject, no topic captures it, the
// publish fails): that message and the rest of its batch are put back
// (nacked), and the error says why. A crash between the publish and the ack
// requeues a message twice (at least once). RequeueFrom blocks on the
// publishes and acks, bounded by ctx.
func (b *Broker) RequeueFrom(ctx context.Context, dlq TopicName, group GroupName, max int) (int, error) {
	b.requeueMu.Lock()
	defer b.requeueMu.Unlock()
	return b.requeueFromLocked(ctx, dlq, group, max, requeueTarget{})
}

// requeueFromLocked is RequeueFrom for a caller holding b.requeueMu.
func (b *Broker) requeueFromLocked(ctx context.Context, dlq TopicName, group GroupName, max int, to requeueTarget) (int, error) {
	if max < 1 {
		return 0, fmt.Errorf("requeue %s: %w: max %d < 1", dlq, ErrInvalid, max)
	}
	t, ok := b.Topic(dlq)
	if !ok {
		return 0, fmt.Errorf("requeue %s: %w", dlq, ErrNoTopic)
	}
	g, err := t.Group(group, GroupConfig{})
	if err != nil {
		return 0, fmt.Errorf("requeue %s: %w", dlq, err)
	}
	moved := 0
	for moved < max {
		ds, err := g.pollNow(ctx, min(max-moved, requeueBatch))
		if err != nil {
			return moved, fmt.Errorf("requeue %s: %w", dlq, err)
		}
		if len(ds) == 0 {
			return moved, nil
		}
		for i, d := range ds {
			if err := b.requeueOne(ctx, d, to); err != nil {
				for _, rest := range ds[i:] {
					_ = b.Settle(rest.Handle, Nack(0), nil) // back to ready; a failure leaves it to its lease
				}
				return moved, fmt.Errorf("requeue %s: offset %d:%d: %w", dlq, d.Handle.Partition, d.Handle.Seq, err)
			}
			moved++
		}
	}
	return moved, nil
}

func (b *Broker) requeueOne(ctx context.Context, d Delivery, to requeueTarget) error {
	if err := b.republish(ctx, d, to); err != nil {
		return err
	}
	return b.settleWait(ctx, d.Handle, Ack())
}

// requeueTarget says where a requeue publishes: to topic to when set,
// else to the topic that now captures each message's original subject,
// once allow (when set) takes that subject.
type requeueTarget struct {
	to    *Topic
	allow func(subject string) error
}

// republish publishes dead letter d (its header, payload and key, under
// its original subject) again to its target, and returns once the publish
// is durable.
func (b *Broker) republish(ctx context.Context, d Delivery, to requeueTarget) error {
	subject := headerValue(d.Header, wire.HeaderSubject)
	if subject == "" {
		return fmt.Errorf("%w: no Fibril-Subject header", ErrInvalid)
	}
	dest := to.to
	if dest == nil {
		if to.allow != nil {
			if err := to.allow(subject); err != nil {
				return err
			}
		}
		if dest = b.Route(subject); dest == nil {
			// Its topic was deleted (deleting a topic leaves its
			// dead-letter topics): refused, and the message stays, until
			// a topic captures the subject again or a requeue names one.
			return fmt.Errorf("%w: no topic captures %q now (deleted? create a topic for it, requeue to a topic you name, or delete this dead-letter topic)", ErrNoTopic, subject)
		}
	}
	// A requeue stores the message again on purpose: not a duplicate of
	// the original, whose id it keeps.
	m := Message{Subject: subject, Header: stripHeaders(d.Header, dlqHeaderNames), Data: d.Data, noDedup: true}
	if k := headerValue(d.Header, wire.HeaderKey); k != "" {
		m.Key = []byte(k)
	}
	_, err := dest.Publish(ctx, m)
	return err
}

// pollNow polls without waiting and returns copies.
func (g *Group) pollNow(ctx context.Context, max int) ([]Delivery, error) {
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
	var perr error
	err := g.t.parts[0].box.room.waitUntil(ctx, func() bool {
		_, perr = g.pollAsync(max, 0, 0, 0, done)
		return !errors.Is(perr, ErrQueueFull)
	})
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return nil, perr
	}
	r := <-ch // a non-waiting poll is always answered
	return r.ds, r.err
}

// dlqHeaderNames are the header lines a dead letter gets (dlqHeader).
var dlqHeaderNames = []string{wire.HeaderReason, wire.HeaderError, wire.HeaderSubject, wire.HeaderPartition, wire.HeaderSeq, wire.HeaderDeliveries}

// headerValue returns the value of the first header line named key (case
// insensitive) of a NATS/1.0 header block, or "".
func headerValue(hdr []byte, key string) string {
	v, _ := wire.HeaderValue(hdr, key)
	return string(v)
}

// stripHeaders returns hdr without the lines named in drop (and without its
// status); nil when hdr is not a NATS/1.0 block or no line is left.
func stripHeaders(hdr []byte, drop []string) []byte {
	var out []byte
	wire.RangeHeaderLines(hdr, func(line []byte) bool {
		k, _, _ := wire.CutHeaderLine(line)
		for _, d := range drop {
			if wire.EqualFold(k, d) {
				return true
			}
		}
		if out == nil {
			out = append(out, wire.HeaderPrefix+"\r\n"...)
		}
		out = append(append(out, line...), "\r\n"...)
		return true
	})
	if out == nil {
		return nil
	}
	return append(out, "\r\n"...)
}
