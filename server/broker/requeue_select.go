package broker

// A selective requeue (SPEC.md 10, TOPIC REQUEUE with filter or range):
// the dead letters whose original subject matches a filter, or whose
// offsets lie in a range, go back to the topics that capture their
// subject, each published first and then settled in RequeueGroup by its
// offset (settleRequeued, which may lie ahead of the group's head: it is
// kept in the group's ack spans and moves nothing else), so a later
// requeue of everything does not move it again. Requeues run one at a
// time per broker (Broker.requeueMu), so no two pick the same message.

import (
	"context"
	"fmt"

	"github.com/fibrilmq/fibril/wire"
)

// RequeueSelect picks the dead letters a requeue moves. The zero value
// (besides Max) is every one, in offset order (RequeueFrom).
type RequeueSelect struct {
	// Max is the most messages moved (1 or more).
	Max int
	// Filter are subject filters on each message's original subject
	// (its Fibril-Subject header); none: every subject. At most
	// wire.MaxFilters.
	Filter []string
	// FromSeq and ToSeq bound the offsets, in every partition of the
	// dead-letter topic (0: no bound).
	FromSeq, ToSeq Seq
	// To, when set, is the topic every moved message is published to
	// (under its original subject), instead of the topic that captures
	// that subject now: the way back for a deleted topic's dead letters.
	To TopicName
	// Allow, when set, decides each message's original subject before it
	// is published to the topic that captures it (a server's permission
	// check; a server checks To itself); a refusal stops the requeue with
	// its error and the message stays.
	Allow func(subject string) error
}

// all reports whether s selects every message (no filter, no range).
func (s RequeueSelect) all() bool { return len(s.Filter) == 0 && s.FromSeq == 0 && s.ToSeq == 0 }

// target resolves To.
func (s RequeueSelect) target(b *Broker) (requeueTarget, error) {
	rt := requeueTarget{allow: s.Allow}
	if s.To != "" {
		t, ok := b.Topic(s.To)
		if !ok {
			return rt, fmt.Errorf("%w: requeue target %s", ErrNoTopic, s.To)
		}
		rt.to = t
	}
	return rt, nil
}

// Check reports a selection RequeueSelected refuses (ErrInvalid).
func (s RequeueSelect) Check() error {
	if s.Max < 1 {
		return fmt.Errorf("%w: max %d < 1", ErrInvalid, s.Max)
	}
	if len(s.Filter) > wire.MaxFilters {
		return fmt.Errorf("%w: filter has %d entries, at most %d", ErrInvalid, len(s.Filter), wire.MaxFilters)
	}
	for i, f := range s.Filter {
		if !wire.ValidFilter(f) {
			return fmt.Errorf("%w: filter[%d] %q is not a subject filter", ErrInvalid, i, f)
		}
	}
	if s.ToSeq != 0 && s.FromSeq > s.ToSeq {
		return fmt.Errorf("%w: from_seq %d above to_seq %d", ErrInvalid, s.FromSeq, s.ToSeq)
	}
	return nil
}

func (s RequeueSelect) matches(subject string) bool {
	if len(s.Filter) == 0 {
		return true
	}
	for _, f := range s.Filter {
		if wire.Match(f, subject) {
			return true
		}
	}
	return false
}

// RequeueSelected moves up to sel.Max dead letters of topic dlq that sel
// picks back to their original subjects, as RequeueFrom does for every
// one (which it calls when sel picks all). It stops at the first message
// it cannot move (no topic captures its subject, the publish fails),
// which stays, and the error says why. Messages leased in RequeueGroup
// (a requeue of everything in flight) are left alone.
func (b *Broker) RequeueSelected(ctx context.Context, dlq TopicName, sel RequeueSelect) (int, error) {
	if err := sel.Check(); err != nil {
		return 0, fmt.Errorf("requeue %s: %w", dlq, err)
	}
	to, err := sel.target(b)
	if err != nil {
		return 0, fmt.Errorf("requeue %s: %w", dlq, err)
	}
	b.requeueMu.Lock()
	defer b.requeueMu.Unlock()
	if sel.all() {
		return b.requeueFromLocked(ctx, dlq, RequeueGroup, sel.Max, to)
	}
	t, ok := b.Topic(dlq)
	if !ok {
		return 0, fmt.Errorf("requeue %s: %w", dlq, ErrNoTopic)
	}
	g, err := t.Group(RequeueGroup, GroupConfig{})
	if err != nil {
		return 0, fmt.Errorf("requeue %s: %w", dlq, err)
	}
	moved := 0
	for idx := range t.parts {
		part := Partition(idx)
		from := max(sel.FromSeq, 1)
		for moved < sel.Max {
			msgs, next, err := t.Browse(ctx, part, from, requeueBatch)
			if err != nil {
				return moved, fmt.Errorf("requeue %s: %w", dlq, err)
			}
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				if sel.ToSeq != 0 && m.Seq > sel.ToSeq {
					next = 0
					break
				}
				if moved == sel.Max || !sel.matches(headerValue(m.Header, wire.HeaderSubject)) {
					continue
				}
				n, err := b.requeueStored(ctx, t, g, m, to)
				moved += n
				if err != nil {
					return moved, fmt.Errorf("requeue %s: offset %d:%d: %w", dlq, part, m.Seq, err)
				}
			}
			if next == 0 || next == from {
				break
			}
			from = next
		}
	}
	return moved, nil
}

// requeueStored moves one stored dead letter m of t, unless group g
// (RequeueGroup) settled or leased it already: its publish first, then its
// settle in g by offset, durable before it returns. It returns how many
// moved (0 or 1).
func (b *Broker) requeueStored(ctx context.Context, t *Topic, g *Group, m StoredMessage, to requeueTarget) (int, error) {
	var open bool
	if err := t.onActor(ctx, m.Partition, func(p *partition) {
		gp := p.groups[g.id]
		if gp == nil {
			return
		}
		_, leased := gp.pending[m.Seq]
		open = !leased && !gp.acks.contains(m.Seq)
	}); err != nil {
		return 0, err
	}
	if !open {
		return 0, nil
	}
	d := Delivery{Subject: m.Subject, Header: m.Header, Data: m.Data}
	if err := b.republish(ctx, d, to); err != nil {
		return 0, err
	}
	done := make(chan struct{})
	if err := t.parts[m.Partition].controlChecked(func(p *partition) {
		if gp := p.groups[g.id]; gp != nil {
			gp.settleRequeued(m.Seq)
		}
		p.commit.onCommit(func() { close(done) })
	}); err != nil {
		return 1, err
	}
	select {
	case <-done:
		return 1, nil
	case <-ctx.Done():
		return 1, ctx.Err()
	}
}

// settleRequeued settles seq, which a selective requeue moved, unless it
// is settled or leased: it may lie ahead of next, which stays.
func (g *groupState) settleRequeued(seq Seq) {
	if _, leased := g.pending[seq]; leased || g.acks.contains(seq) {
		return
	}
	if g.acks.add(seq) {
		g.emit(evSettle, seq, settleRequeued)
	}
}
