package broker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fibrilmq/fibril/wire"
)

// Group returns the group named name, creating it with cfg when missing
// (cfg is ignored for an existing group). Creating a group also creates its
// dead-letter topic when missing. It blocks on disk I/O and on the
// partitions recording where the group starts. With Options.Catalog a
// missing group is made through the replicated catalog (catrepl.go).
func (t *Topic) Group(name GroupName, cfg GroupConfig) (*Group, error) {
	if err := validTopicName(TopicName(name), false); name != RequeueGroup && (err != nil || strings.Contains(string(name), ".")) {
		return nil, fmt.Errorf("%w: group name %q (one token, no wildcards)", ErrInvalid, name)
	}
	if t.b.opts.Catalog != nil {
		if g, ok := t.FindGroup(name); ok {
			return g, nil
		}
		v, err := t.b.proposeOp(catOp{Kind: opGroup, Topic: t.name, Group: name, GroupConfig: &cfg})
		g, _ := v.(*Group)
		return g, err
	}
	return t.group(name, cfg, 0)
}

// group is Group made here, with the group id given (0: the next one).
func (t *Topic) group(name GroupName, cfg GroupConfig, id GroupID) (*Group, error) {
	b := t.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if g, ok := t.groups[name]; ok {
		return g, nil
	}
	if b.closed.Load() {
		return nil, ErrClosed
	}
	if cur, ok := b.Topic(t.name); !ok || cur != t {
		return nil, fmt.Errorf("group %s/%s: %w", t.name, name, ErrNoTopic)
	}
	if strings.HasPrefix(string(t.name), wire.DLQPrefix) {
		// Dead letters of dead letters would pile up forever: by default a
		// group on a dead-letter topic redelivers without limit.
		if cfg.MaxDeliveries == 0 {
			cfg.MaxDeliveries = -1
		}
		if cfg.DeadLetter == "" {
			cfg.DeadLetter = "-"
		}
	}
	cfg, err := cfg.withDefaults(t.name, name)
	if err != nil {
		return nil, fmt.Errorf("group %s/%s: %w", t.name, name, err)
	}
	if cfg.DeadLetter != "-" {
		if _, ok := b.Topic(TopicName(cfg.DeadLetter)); !ok {
			// Dead letters are the source's messages: same durability,
			// same codec on disk.
			// No de-duplication: dead letters keep their message ids.
			off := int64(0)
			dcfg := TopicConfig{Durability: t.cfg.Durability, Compression: t.cfg.Compression, DuplicateWindowMs: &off}
			if _, err := b.createTopicLocked(TopicName(cfg.DeadLetter), dcfg); err != nil {
				return nil, fmt.Errorf("group %s/%s: dead-letter topic: %w", t.name, name, err)
			}
		}
	}
	if id == 0 {
		id = b.cat.NextGroupID
	}
	g := &Group{t: t, id: id, name: name, cfg: cfg, parts: make([]*groupPart, len(t.parts))}
	ct, ok := b.cat.entry(t.id)
	if !ok {
		return nil, fmt.Errorf("group %s/%s: %w", t.name, name, ErrNoTopic)
	}
	if b.opts.Catalog == nil {
		// Reserve the id on disk first, so a crash can never hand it out
		// twice. A replicated catalog needs no reservation: a crash before
		// the group's change applies it again with the same id.
		ch := b.cat.changeOf(ct)
		ch.NextGroupID = max(ch.NextGroupID, id+1)
		if err := b.commitCatalog(ch); err != nil {
			return nil, fmt.Errorf("group %s/%s: %w", t.name, name, err)
		}
	}
	errs := make(chan error, len(t.parts))
	for _, p := range t.parts {
		p.control(func(p *partition) { p.addGroup(g, errs) })
	}
	var addErr error
	for range t.parts {
		if err := <-errs; err != nil && addErr == nil {
			addErr = err
		}
	}
	if addErr != nil {
		t.dropGroupState(g.id) // the id stays burned; the catalog never listed it
		return nil, fmt.Errorf("group %s/%s: %w", t.name, name, addErr)
	}
	ct.Groups = append(ct.Groups, catGroup{ID: g.id, Name: name, Config: cfg})
	fin := b.cat.changeOf(ct)
	fin.NextGroupID = max(fin.NextGroupID, id+1)
	if err := b.commitCatalog(fin); err != nil {
		t.dropGroupState(g.id)
		return nil, fmt.Errorf("group %s/%s: %w", t.name, name, err)
	}
	t.groups[name] = g
	return g, nil
}

// FindGroup returns the group named name, if it exists.
func (t *Topic) FindGroup(name GroupName) (*Group, bool) {
	t.b.mu.Lock()
	defer t.b.mu.Unlock()
	g, ok := t.groups[name]
	return g, ok
}

// Groups returns the topic's groups, sorted by name, without the
// broker's internal ones (RequeueGroup; FindGroup finds those).
func (t *Topic) Groups() []*Group {
	t.b.mu.Lock()
	defer t.b.mu.Unlock()
	names := make([]GroupName, 0, len(t.groups))
	for n := range t.groups {
		if !n.internal() {
			names = append(names, n)
		}
	}
	sortNames(names)
	out := make([]*Group, len(names))
	for i, n := range names {
		out[i] = t.groups[n]
	}
	return out
}

// DeleteGroup removes a group: its state is dropped, its parked polls are
// answered with ErrClosed and its subscriptions stop. Its id is never reused.
// The dead-letter topic stays.
func (t *Topic) DeleteGroup(name GroupName) error {
	if t.b.opts.Catalog != nil {
		_, err := t.b.proposeOp(catOp{Kind: opDeleteGroup, Topic: t.name, Group: name})
		return err
	}
	return t.deleteGroup(name)
}

// deleteGroup is DeleteGroup made here.
func (t *Topic) deleteGroup(name GroupName) error {
	b := t.b
	b.mu.Lock()
	defer b.mu.Unlock()
	g, ok := t.groups[name]
	if !ok {
		return fmt.Errorf("delete group %s/%s: %w", t.name, name, ErrNoGroup)
	}
	ct, ok := b.cat.entry(t.id)
	if !ok {
		return fmt.Errorf("delete group %s/%s: %w", t.name, name, ErrNoTopic)
	}
	ct.Groups = slices.DeleteFunc(ct.Groups, func(cg catGroup) bool { return cg.ID == g.id })
	if err := b.commitCatalog(b.cat.changeOf(ct)); err != nil {
		return fmt.Errorf("delete group %s/%s: %w", t.name, name, err)
	}
	delete(t.groups, name)
	t.dropGroupState(g.id)
	return nil
}

// dropGroupState removes a group's state from every partition and waits.
func (t *Topic) dropGroupState(id GroupID) {
	done := make(chan struct{}, len(t.parts))
	for _, p := range t.parts {
		p.control(func(p *partition) {
			p.removeGroup(id)
			done <- struct{}{}
		})
	}
	for _, p := range t.parts {
		select {
		case <-done:
		case <-p.box.done: // actor stopped (Close): nothing left to remove
		}
	}
}

// addGroup (actor) creates the group's state here and records where it
// starts; errs gets the result once that record is durable.
func (p *partition) addGroup(g *Group, errs chan<- error) {
	start, err := p.groupStart(g.cfg)
	if err != nil {
		errs <- fmt.Errorf("partition %d: %w", p.idx, err)
		return
	}
	gs := stateFor(g, start)
	gs.ev = &p.evw.sink
	gs.durableLeases = p.role.rep != nil
	gs.emit(evInit, start, 0)
	gp := &groupPart{groupState: gs, g: g}
	p.groups[g.id] = gp
	p.order = append(p.order, gp)
	g.parts[p.idx] = gp
	p.commit.onCommit(func() { errs <- p.commit.err })
}

// groupStart (actor) returns the offset where a new group with cfg begins
// here (SPEC.md 10.2, start).
func (p *partition) groupStart(cfg GroupConfig) (Seq, error) {
	from := p.readFrom()
	switch cfg.Start {
	case StartNew:
		// durData, not last: a crash may lose what is not durable, and
		// the offsets would then be handed out again below the start.
		return p.commit.durData + 1, nil
	case StartSeq:
		// Up to last+1, not durData+1: the group is reported created only
		// once this round's data is durable (the caller waits on commit).
		if next := p.last + 1; Seq(cfg.StartSeq) > next {
			return 0, fmt.Errorf("%w: start_seq %d beyond the next offset %d", ErrInvalid, cfg.StartSeq, next)
		}
		return max(Seq(cfg.StartSeq), from), nil
	case StartTime:
		at, err := cfg.startTime()
		if err != nil {
			return 0, err
		}
		return p.firstStoredAtOrAfter(at, from)
	}
	return from, nil
}

// firstStoredAtOrAfter (actor) returns the first offset from from on whose
// record was stored at or after t (Unix ns), or last+1 when none was. It
// binary-searches the records' timestamps, which the data log takes from
// the wall clock when it appends: about log2(retained) reads (64 at most),
// each of one record (a compressed sealed segment is decompressed once).
// After the clock was set back the answer is one of the places where the
// timestamps cross t.
func (p *partition) firstStoredAtOrAfter(t int64, from Seq) (Seq, error) {
	lo, hi := from, p.last+1 // the answer is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		r, err := p.data.Read(mid)
		if err != nil {
			return 0, fmt.Errorf("start_time: read offset %d: %w", mid, err)
		}
		if r.Time >= t {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

// removeGroup (actor) drops a group's state.
func (p *partition) removeGroup(id GroupID) {
	gp := p.groups[id]
	if gp == nil {
		return
	}
	delete(p.groups, id)
	for i, x := range p.order {
		if x == gp {
			p.order = append(p.order[:i], p.order[i+1:]...)
			break
		}
	}
	for _, w := range gp.waiters {
		if w.claim() {
			p.commit.onCommit(func() { w.finish(nil, ErrClosed) })
		}
	}
	for _, s := range gp.subs {
		s.closed.Store(true)
	}
}
