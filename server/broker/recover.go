package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/fibrilmq/fibril/server/seglog"
)

// openPartition opens a partition's logs and rebuilds its consumer state:
// the latest snapshot, then the events that follow it. Leases are not
// persisted, so every delivered, unsettled message is ready again.
func openPartition(t *Topic, idx Partition, groups []*Group) (*partition, error) {
	o := &t.b.opts
	dir := filepath.Join(t.dir, strconv.FormatUint(uint64(idx), 10))
	var data, events seglog.Store
	var rep Replica
	if t.HeldHere(idx) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("partition %d: %w", idx, err)
		}
		var err error
		if data, events, rep, err = t.openPartitionLogs(dir, idx, o.QuickStart); err != nil {
			return nil, fmt.Errorf("partition %d: %w", idx, err)
		}
	} else {
		data, events, rep = openElsewhere() // placement.go: no directory here
	}
	p := &partition{
		t: t, idx: idx, dir: dir, clock: o.Clock,
		box:    mailbox{q: newRing(o.QueueSize), wk: newWaker(), quit: make(chan struct{}), done: make(chan struct{})},
		groups: map[GroupID]*groupPart{},
		// Under durability group and sync the partition owns fsync
		// (syncer.go: the actor writes, the commit fsyncs), so the logs
		// themselves do not.
		commit: commitPipeline{pipelined: t.cfg.Durability != DurabilityNone, stages: o.Stages},
		lanes:  syncLanes{stop: make(chan struct{})},
	}
	p.role.follow(p, rep) // before the state is read: a change meanwhile is seen at the first round
	p.useLogs(data, events)
	p.evw.sink.chunk = evChunkFor(o.EventSegmentSize)
	p.first, p.last = data.Bounds()
	p.commit.durData = p.last
	for _, g := range groups {
		p.attach(g, stateFor(g, p.first))
	}
	if err := p.loadState(); err != nil {
		p.closeStores()
		return nil, fmt.Errorf("partition %d: %w", idx, err)
	}
	return p, nil
}

// loadState rebuilds the partition's consumer state from its logs, over
// groups that start at the data log's first record: at Open, and on the
// actor when a replicated partition starts to serve (role.go: rebuild).
func (p *partition) loadState() error {
	named, err := p.restoreSideEvents()
	if err != nil {
		return err
	}
	if err := p.recoverState(); err != nil {
		return err
	}
	for _, gp := range p.order {
		gp.clampTo(p.last)
		gp.ev = &p.evw.sink
		gp.durableLeases = p.role.rep != nil
	}
	// Before truncatedTo: a range lost from the front of the data log
	// lies below its first record and is listed too.
	p.settleHoles()
	for _, gp := range p.order {
		gp.truncatedTo(p.first)
		gp.restored(p.clock.Now().UnixNano())
	}
	p.sampleSizes()
	if p.last >= p.first {
		p.sizes.addRun(p.first, p.last, p.avgSize())
	}
	_, p.commit.durEvents = p.events.Bounds()
	p.openSideCopies(named)
	p.commit.safeLow = p.lowFrontier()
	p.publishStats()
	return nil
}

// openLogs opens a partition's two logs in dir under the topic's
// durability; quick: verify only what no earlier open checked.
func (t *Topic) openLogs(dir string, quick bool) (data, events seglog.Store, err error) {
	policy := t.cfg.policy()
	data, err = t.openStore(filepath.Join(dir, dataLogName), false, policy, quick)
	if err != nil {
		return nil, nil, fmt.Errorf("data log: %w", err)
	}
	events, err = t.openStore(filepath.Join(dir, eventsLogName), true, policy, quick)
	if err != nil {
		data.Close()
		return nil, nil, fmt.Errorf("event log: %w", err)
	}
	return data, events, nil
}

// useLogs (before the actor runs, or on it) makes data and events the
// partition's logs, with fsync lanes over them when the commit is
// pipelined (each starts at its first request) and the swap guard on a
// compressed data log.
func (p *partition) useLogs(data, events seglog.Store) {
	p.data, p.events = data, events
	if p.commit.pipelined {
		p.lanes.data, p.lanes.ev = newSyncLane(data, true), newSyncLane(events, false)
		for _, l := range p.lanes.all() {
			l.start = func() { p.startLane(l) }
		}
	}
	p.swaps = swapGuard{}
	if p.t.compressed() {
		p.swaps.log = data // seglog.Store: SwapCount is 0 for a store that holds no replaced maps
	}
}

func (p *partition) attach(g *Group, gs *groupState) {
	if old := p.groups[g.id]; old != nil {
		old.groupState = gs
		return
	}
	gp := &groupPart{groupState: gs, g: g}
	p.groups[g.id] = gp
	p.order = append(p.order, gp)
	g.parts[p.idx] = gp
}

func (p *partition) recoverState() error {
	var from Seq = 1
	b, err := os.ReadFile(filepath.Join(p.dir, snapName))
	switch {
	case err == nil:
		seq, sgs, err := decodeSnapshot(b)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(p.dir, snapName), err)
		}
		for _, sg := range sgs {
			if sg.id == 0 {
				p.purgeFloor = sg.frontier // the purge floor (see snapshot)
				continue
			}
			gp := p.groups[sg.id]
			if gp == nil {
				continue // deleted group
			}
			gs := gp.fresh(sg.frontier)
			gs.next, gs.pending, gs.cnt = sg.next, sg.pending, sg.cnt
			gs.acks.setSpans(sg.spans)
			gp.groupState = gs
		}
		from = seq + 1
		p.evw.last, p.evw.snapSeq = seq, seq
	case errors.Is(err, os.ErrNotExist):
		if first, _ := p.events.Bounds(); first > 1 {
			return fmt.Errorf("%w: %s is missing, and the event log %s starts at event %d: the events before it are only in a snapshot (restore the snapshot, or run fibril repair)",
				ErrCorruptState, filepath.Join(p.dir, snapName), filepath.Join(p.dir, eventsLogName), first)
		}
	default:
		return fmt.Errorf("read snapshot %s: %w", filepath.Join(p.dir, snapName), err)
	}
	_, last := p.events.Bounds()
	var decErr error
	for at := from; at <= last && decErr == nil; {
		was := at
		err := p.events.Scan(at, 1<<20, func(r seglog.Record) bool {
			decErr = decodeEvents(r.Data, p.replay)
			if decErr != nil {
				decErr = fmt.Errorf("event %d: %w", r.Seq, decErr)
				return false
			}
			at = r.Seq + 1
			return true
		})
		if err != nil {
			return fmt.Errorf("replay the event log %s: %w", filepath.Join(p.dir, eventsLogName), err)
		}
		if at == was {
			break
		}
	}
	if decErr != nil {
		return fmt.Errorf("replay the event log %s: %w", filepath.Join(p.dir, eventsLogName), decErr)
	}
	if last > p.evw.last {
		p.evw.last = last
	}
	return nil
}

// replay applies one persisted event; owners and lease ends (evNack,
// evExpire, evRelease) only inform the history: leases are not persisted.
func (p *partition) replay(e event) {
	kind, gid, seq, arg := e.kind, e.group, e.seq, e.arg
	if gid == 0 && kind == evPurge {
		p.purgeFloor = max(p.purgeFloor, seq)
		return
	}
	gp := p.groups[gid]
	if gp == nil {
		return // group deleted, or its creation never reached the catalog
	}
	if kind == evInit {
		gp.groupState = gp.fresh(seq)
		return
	}
	if kind == evLease {
		gp.applyLease(seq, int64(arg), Principal(e.owner))
		return
	}
	gp.apply(kind, seq, arg)
}

func (p *partition) closeStores() {
	if err := p.data.Close(); err != nil {
		p.closeErr = errors.Join(p.closeErr, fmt.Errorf("topic %s partition %d: close data: %w", p.t.name, p.idx, err))
	}
	if err := p.events.Close(); err != nil {
		p.closeErr = errors.Join(p.closeErr, fmt.Errorf("topic %s partition %d: close events: %w", p.t.name, p.idx, err))
	}
}

// sampleSizes seeds the average record size from the last records: the
// size ledger counts the records stored before Open at that size (only
// messages published since are counted exactly), so byte limits hold right
// after a restart too.
func (p *partition) sampleSizes() {
	if p.last < p.first {
		return
	}
	from := p.first
	if p.last-from >= 100 {
		from = p.last - 99
	}
	if err := p.data.Scan(from, 1<<20, func(r seglog.Record) bool {
		p.totalBytes += int64(len(r.Data))
		p.totalMsgs++
		return true
	}); err != nil {
		p.t.b.logf("topic %s partition %d: sampling record sizes: %v", p.t.name, p.idx, err)
	}
}
