package broker

import (
	"context"
	"fmt"
)

// Operations for operators (the admin API): pause and resume a group,
// purge a topic. Requeueing dead letters is in requeue.go.

// Pause stops deliveries of the group: polls find nothing (a waiting poll
// keeps waiting), subscriptions get nothing. Settles of earlier deliveries
// still work and leases still expire. The pause is recorded in the catalog,
// so the group stays paused across a restart until Resume. Pausing a paused
// group is a no-op. Pause blocks on disk I/O.
func (g *Group) Pause() error { return g.setPaused(true) }

// Resume ends a pause: deliveries start again at once. Resuming a group that
// is not paused is a no-op. Resume blocks on disk I/O.
func (g *Group) Resume() error { return g.setPaused(false) }

// Paused reports whether the group is paused.
func (g *Group) Paused() bool { return g.paused.Load() }

func (g *Group) setPaused(paused bool) error {
	if b := g.t.b; b.opts.Catalog != nil {
		kind := opResume
		if paused {
			kind = opPause
		}
		_, err := b.proposeOp(catOp{Kind: kind, Topic: g.t.name, Group: g.name})
		return err
	}
	return g.setPausedHere(paused)
}

// setPausedHere is setPaused made here.
func (g *Group) setPausedHere(paused bool) error {
	b := g.t.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return ErrClosed
	}
	if cur, ok := g.t.groups[g.name]; !ok || cur != g {
		return fmt.Errorf("pause %s/%s: %w", g.t.name, g.name, ErrNoGroup)
	}
	if g.paused.Load() == paused {
		return nil
	}
	ct, ok := b.cat.entry(g.t.id)
	if !ok {
		return fmt.Errorf("pause %s/%s: %w", g.t.name, g.name, ErrNoTopic)
	}
	for j := range ct.Groups {
		if ct.Groups[j].ID == g.id {
			ct.Groups[j].Paused = paused
		}
	}
	if err := b.commitCatalog(b.cat.changeOf(ct)); err != nil {
		return fmt.Errorf("pause %s/%s: %w", g.t.name, g.name, err)
	}
	g.paused.Store(paused)
	if !paused {
		for _, p := range g.t.parts {
			p.control(func(*partition) {}) // a round dispatches to parked polls and subscriptions
		}
	}
	return nil
}

// Purge settles everything the topic holds now, for every group, and lets
// retention delete it: in-flight deliveries of it end (acking them is then
// an idempotent no-op), and groups created later start after it. Messages
// published while Purge runs may or may not be purged. Purge blocks until
// the purge is durable in every partition, or ctx ends.
func (t *Topic) Purge(ctx context.Context) error {
	errs := make(chan error, len(t.parts))
	for _, p := range t.parts {
		if err := p.controlChecked(func(p *partition) { p.purge(errs) }); err != nil {
			return fmt.Errorf("purge %s: %w", t.name, err)
		}
	}
	var first error
	for range t.parts {
		select {
		case err := <-errs:
			if err != nil && first == nil {
				first = err
			}
		case <-ctx.Done():
			return fmt.Errorf("purge %s: %w", t.name, ctx.Err())
		}
	}
	if first != nil {
		return fmt.Errorf("purge %s: %w", t.name, first)
	}
	return nil
}

// purge (actor) settles everything up to the last stored offset for every
// group and raises the purge floor; errs gets the result once durable.
func (p *partition) purge(errs chan<- error) {
	to := p.last + 1
	if p.purgeTo(to) {
		p.evw.sink.emitPartition(evPurge, to)
		for _, gp := range p.order {
			if gp.frontier() < to {
				gp.emit(evPurge, to, 0)
				gp.truncatedTo(to)
			}
		}
	}
	p.commit.onCommit(func() { errs <- p.commit.err })
}

// emitPartition appends a partition-level event (group id 0).
func (e *evSink) emitPartition(kind byte, seq Seq) {
	(&groupState{id: 0, ev: e}).emit(kind, seq, 0)
}
