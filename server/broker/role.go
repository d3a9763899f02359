package broker

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/fibrilmq/fibril/server/seglog"
)

// A replicated partition (Options.OpenPartition returning a Replica)
// is served by one node at a time: the leader of its replicated logs,
// once those hold everything committed before its term. Elsewhere the
// partition serves nothing: each round's publishes and settles are
// answered ErrNotLeader, a poll is declined as by a partition with
// nothing ready (answered ErrNotLeader when no partition of the topic
// is served here), a poll's tour passes it by, and control closures
// still run, so the catalog stays in step. When the replica starts to serve, the actor rebuilds
// the whole partition state from its logs, as Open does after a
// restart; when it stops, the actor fails what waits (pending commits,
// parked and collecting polls) with ErrNotLeader and drops the state at
// the next rebuild. The broker knows nothing of how the logs replicate.

// ErrNotLeader: the partition is served by another node (or, for a
// moment, by none). Retriable there; an operation that was waiting when
// this node stopped serving has an unknown outcome.
var ErrNotLeader = errors.New("broker: partition is not served by this node")

// Replica is the role of a partition whose logs are replicated, as the
// logs' opener gives it (PartitionLogs). Its methods are safe for
// concurrent use.
type Replica interface {
	// Serving reports whether this node serves the partition now (it
	// leads, and its logs hold everything committed before its term)
	// and an epoch that changes at every change of that.
	Serving() (ok bool, epoch uint64)
	// Notify registers fn, called at every change of Serving; fn never
	// blocks.
	Notify(fn func())
	// WriteState replaces the file name in the partition directory on
	// every replica, atomically and in order with the logs' records,
	// blocking until it is committed. It fails off the serving node.
	WriteState(name string, data []byte) error
}

// PartitionLogs is a partition's pair of logs as a PartitionOpener
// opens them. Replica is nil for logs that are not replicated.
type PartitionLogs struct {
	Data, Events seglog.Store
	Replica      Replica
}

// PartitionOpener opens (creating if needed) both logs of the partition
// in dir ("data" and "events" inside it, as the default opener names
// them) under the given policy, and the partition's replica role if they
// are replicated; holders names the nodes holding the partition (its
// placement, this node among them), nil for every node. The stores keep
// seglog.Store's contract as StoreOpener's do.
type PartitionOpener func(dir string, policy seglog.Policy, holders []string) (PartitionLogs, error)

// roleState (actor) is the partition's view of its Replica.
type roleState struct {
	rep     Replica // nil: not replicated, always served
	epoch   uint64  // the epoch the state was built in
	serving bool
	// seen is the replica's Serving as its last notification found it
	// (epoch<<1 | serving), for publishers and the server off the actor
	// (servedNow), so the publish path takes no replica lock.
	seen atomic.Uint64
}

// follow takes rep as p's role before p's state is read; its changes
// wake the actor and refresh seen.
func (r *roleState) follow(p *partition, rep Replica) {
	if rep == nil {
		return
	}
	r.rep = rep
	r.serving, r.epoch = rep.Serving()
	r.note(r.serving, r.epoch)
	rep.Notify(func() {
		r.note(rep.Serving())
		p.box.wk.kick()
	})
}

// note records a Serving read in seen unless a later epoch is there
// already (two notifications may read and store out of order).
func (r *roleState) note(ok bool, epoch uint64) {
	v := epoch << 1
	if ok {
		v |= 1
	}
	for {
		cur := r.seen.Load()
		if cur>>1 > epoch || r.seen.CompareAndSwap(cur, v) {
			return
		}
	}
}

// serves reports whether p serves (always, unless replicated).
func (r *roleState) serves() bool { return r.rep == nil || r.serving }

// roleRound (actor, before each round) follows the replica's role: when
// the epoch changed it fails what waits and, if this node serves now,
// rebuilds the state from the logs. It reports whether the round may
// run; when not, the round's commands are answered ErrNotLeader.
func (p *partition) roleRound() bool {
	r := &p.role
	if r.rep == nil {
		return true
	}
	if ok, epoch := r.rep.Serving(); epoch != r.epoch {
		if r.serving {
			p.fence()
		}
		r.epoch, r.serving = epoch, false
		if ok {
			if err := p.rebuild(); err != nil {
				p.t.b.logf("ERROR topic %s partition %d: rebuilding the state to serve: %v", p.t.name, p.idx, err)
			} else {
				r.serving = true
			}
		}
	}
	if r.serving {
		return true
	}
	err := fmt.Errorf("topic %s partition %d: %w", p.t.name, p.idx, ErrNotLeader)
	for i := range p.in.cmds {
		if c := &p.in.cmds[i]; c.kind == cmdPoll {
			c.poll.servedElsewhere(p, err)
			p.in.cmds[i] = command{}
		}
	}
	p.refuseRound(err)
	return false
}

// servedElsewhere (actor of a partition another node serves) takes a
// poll the way a partition with nothing ready does, so the topic's
// partitions served here still answer it; when no partition of the
// topic is served here, it answers err.
func (w *pollWaiter) servedElsewhere(p *partition, err error) {
	if w.claimed.Load() {
		return
	}
	if w.elsewhere.Add(1) == w.parts {
		if w.claim() {
			p.commit.onCommit(func() { w.finish(nil, err) })
		}
		return
	}
	if !w.wait {
		w.decline(p)
	}
}

// fence (actor) fails everything that waits on the state of the epoch
// that ended: its outcome is unknown.
func (p *partition) fence() {
	err := fmt.Errorf("topic %s partition %d: %w: leadership lost, outcome unknown", p.t.name, p.idx, ErrNotLeader)
	p.commit.drain(err, nil)
	for _, w := range p.commit.collecting {
		w.finish(nil, err)
	}
	clear(p.commit.collecting)
	p.commit.collecting = p.commit.collecting[:0]
	for _, gp := range p.order {
		for _, w := range gp.waiters {
			if w.claim() {
				w.finish(nil, err)
			}
		}
		gp.waiters = nil
	}
}

// rebuild (actor) drops the partition's state and builds it again from
// its logs (loadState, as Open does), after what ran on the old state has stopped: the
// lanes, the timer and a background snapshot.
func (p *partition) rebuild() error {
	p.timer.halt()
	p.timer.stop, p.timer.at = nil, 0
	if !p.lanes.stopped {
		p.lanes.halt()
	}
	p.lanes = syncLanes{stop: make(chan struct{})}
	p.evw.waitSnapshot()
	chunk := p.evw.sink.chunk
	p.extent = extent{}
	p.commit = commitPipeline{pipelined: p.commit.pipelined}
	p.side = sideCopies{}
	p.evw = eventWriter{}
	p.evw.sink.chunk = chunk
	p.ret = retention{}
	p.holes = holeSet{}
	p.dlqRetry, p.scanWake, p.lastSubject = false, false, ""
	p.useLogs(p.data, p.events)
	p.first, p.last = p.data.Bounds()
	p.commit.durData = p.last
	p.dedup = dedupIndex{}      // reloaded from the logs at its first use (dedup.go)
	p.subjects = subjectIndex{} // likewise (expect.go)
	for _, gp := range p.order {
		gp.groupState = stateFor(gp.g, p.first)
	}
	return p.loadState()
}

// openPartitionLogs opens the partition's two logs in dir: through
// Options.OpenPartition when set (with the replica role, if they are
// replicated), else as openLogs does.
func (t *Topic) openPartitionLogs(dir string, idx Partition, quick bool) (data, events seglog.Store, rep Replica, err error) {
	o := &t.b.opts
	if o.OpenPartition == nil {
		data, events, err = t.openLogs(dir, quick)
		return data, events, nil, err
	}
	pl, err := o.OpenPartition(dir, t.cfg.policy(), t.Holders(idx))
	if err != nil {
		return nil, nil, nil, err
	}
	if pl.Replica != nil && t.compressed() {
		pl.Data.Close()
		pl.Events.Close()
		return nil, nil, nil, fmt.Errorf("%w: compression %q on a replicated partition (not supported yet)", ErrInvalid, t.cfg.Compression)
	}
	return pl.Data, pl.Events, pl.Replica, nil
}

// writeState replaces the partition's file name with data: through the
// replica when replicated (on every replica), else in the directory.
func (p *partition) writeState(name string, data []byte) error {
	if p.role.rep != nil {
		return p.role.rep.WriteState(name, data)
	}
	return writeFileAtomic(p.dir, name, data)
}

// servedNow reports whether this node serves p now, as the replica's
// last notification said (any goroutine: the Replica is set before the
// actor starts; seen is atomic).
func (p *partition) servedNow() bool {
	return p.role.rep == nil || p.role.seen.Load()&1 == 1
}

// Served reports whether this node serves the topic's partition idx now
// (always, for a topic whose partitions are not replicated).
func (t *Topic) Served(idx Partition) bool {
	return int(idx) < len(t.parts) && t.parts[idx].servedNow()
}

// PublishTarget returns the partition a publish of m would be stored in
// and whether this node serves it now: a keyed one (Fibril-Key, else the
// message id) has its partition; an unkeyed one goes to a partition
// served here when there is one, else to the next in round robin. A
// caller that finds it not served hands the publish to the node that
// serves the partition.
func (t *Topic) PublishTarget(m Message) (Partition, bool) {
	key := m.Key
	if len(key) == 0 {
		if id, err := t.msgIDOf(m.Header, m.noDedup); err == nil && id.n > 0 {
			key = id.of(m.Header)
		}
	}
	if len(key) > 0 || len(t.parts) == 1 {
		p := t.partFor(key)
		return p.idx, p.servedNow()
	}
	for _, p := range t.parts {
		if p.servedNow() {
			return p.idx, true
		}
	}
	return t.partFor(nil).idx, false
}

// HandleServed reports whether this node serves the partition of
// delivery h now, and the partition; ok is false for a handle of no
// topic here.
func (b *Broker) HandleServed(h Handle) (topic *Topic, served, ok bool) {
	p, err := b.partitionOf(h)
	if err != nil {
		return nil, false, false
	}
	return p.t, p.servedNow(), true
}
