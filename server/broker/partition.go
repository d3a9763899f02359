package broker

import (
	"encoding/binary"
	"fmt"

	"github.com/fibrilmq/fibril/server/seglog"
	"github.com/fibrilmq/fibril/server/stagetime"
)

// groupPart is a group's state in one partition plus who waits on it. Only
// the actor touches it, except the st* atomics, which Info reads.
type groupPart struct {
	*groupState
	g       *Group
	waiters []*pollWaiter
	subs    []*Subscription
	rr      int

	groupPartStats
}

// partition is one partition of a topic and the actor that owns it: run
// takes each round's input from the mailbox and round calls the parts in
// turn. Each part owns its fields and the methods that touch only them,
// with its tests beside it (doc.go lists them); the methods on partition
// are the glue that needs more than one part. Other goroutines touch only
// box and st. Its 29 fields are that many concerns, not loose state: the
// identity and logs (6), the parts (17, each a type with its own fields)
// and four flags of the round; a new concern comes as a part.
type partition struct {
	t      *Topic
	idx    Partition
	dir    string
	data   seglog.Store
	events seglog.Store
	clock  Clock

	box mailbox   // any goroutine: commands and control closures (mailbox.go)
	st  partStats // written by the actor, read by anyone (stats.go)

	// actor state
	groups map[GroupID]*groupPart
	order  []*groupPart // the groups, in creation order
	// extent is embedded: p.first and p.last are read in every file.
	extent                     // the data log's offsets, sizes and counters (extent.go)
	in          roundInput     // what the round took in, and its scratch (round.go)
	now         int64          // the round's time (unix ns)
	commit      commitPipeline // completions and the batches waiting for fsync (commit.go)
	lanes       syncLanes      // the fsync lanes (syncer.go)
	side        sideCopies     // side copies of the events in the data log (sidecopy.go)
	evw         eventWriter    // the event log's writer and its snapshots (eventlog.go)
	swaps       swapGuard      // replaced maps of a compressed data log (swaprelease.go)
	ret         retention      // paces retention passes (retention.go)
	holes       holeSet        // ranges of the data log lost to damage (lost.go)
	role        roleState      // the replica's role, when the logs are replicated (role.go)
	timer       actorTimer     // the actor's one timer (timer.go)
	lastSubject string         // subject of the last record delivered (decodeMetaReuse)
	dlqRetry    bool           // a dead-letter copy was refused: retry soon (dlq.go)
	scanWake    bool           // a round is asked for to go on scanning a group's head (filter.go)
	stopping    bool           // the mailbox closed: shut down after the next idle round
	closeErr    error          // set by the actor before done closes
	sleep       logSleep       // the open-logs cache (idle.go)
	dedup       dedupIndex     // the message ids of the duplicate window (dedup.go)
	subjects    subjectIndex   // the last offset per subject, for Expect.SubjectSeq (expect.go)
}

// push hands a command to the actor without blocking (mailbox.push).
func (p *partition) push(c *command) error { return p.box.push(c) }

// control runs fn on the actor. It never fails; fn is dropped if the actor
// has stopped (and then it must not matter).
func (p *partition) control(fn func(p *partition)) { p.box.control(fn) }

// controlChecked is control for callers that wait for fn: it fails with
// ErrClosed instead of dropping fn when the actor is stopping.
func (p *partition) controlChecked(fn func(p *partition)) error { return p.box.controlChecked(fn) }

// run is the actor loop: take what arrived, process it as one round, park
// when a round found nothing to do.
func (p *partition) run() {
	defer close(p.box.done)
	for {
		p.in.take(&p.box, p.t.b.opts.MaxBatch)
		idle := p.in.idle()
		if p.roleRound() && p.wakeForRound(idle) {
			p.round()
		}
		p.box.roomMade()
		if !idle {
			continue
		}
		if p.stopping {
			if !p.stopAsleep() {
				p.shutdown()
			}
			return
		}
		p.sleepIfAsked()
		if p.box.park() {
			p.stopping = true
		}
	}
}

// round processes one batch: control closures, publishes (one append),
// settles and polls, lease expiry, dead-lettering, dispatch to waiters, one
// event append, then every completion (now, or once durable), and the
// upkeep after.
func (p *partition) round() {
	p.beginRound()
	p.runControls()
	p.takeCommands()
	p.appendData()
	p.expireLeases()
	p.sendDeadLetters()
	p.dispatch()
	p.commitEvents()
	p.finishRound()
	p.in.reset()
	p.upkeep()
}

// beginRound reads the clock and starts the round in the parts that note
// something before anything of the round reads or writes.
func (p *partition) beginRound() {
	p.now = p.clock.Now().UnixNano()
	p.swaps.beginRound() // before anything of the round reads
	p.commit.beginRound()
	p.timer.begin()
}

// upkeep runs after the round's completions: replaced maps no delivery
// borrows, retention, the stats readers see, and the timer.
func (p *partition) upkeep() {
	p.swaps.watchAfter(len(p.in.pubs) > 0) // pubs lasts until the next round's takeCommands
	p.releaseSwapped()
	p.retain()
	p.publishStats()
	p.armTimer()
}

// runControls runs the control closures the round took.
func (p *partition) runControls() {
	for i, fn := range p.in.ctls {
		fn(p)
		p.in.ctls[i] = nil
	}
}

// takeCommands applies the round's settles and polls, in order, and
// gathers its publishes for appendData.
func (p *partition) takeCommands() {
	p.in.pubs = p.in.pubs[:0]
	for i := range p.in.cmds {
		c := &p.in.cmds[i]
		switch c.kind {
		case cmdPublish:
			p.in.addPublish(c)
		case cmdSettle:
			p.settle(c)
		case cmdPoll:
			p.addPoll(c.poll)
		}
	}
	p.commit.stages.Since(stagetime.PickedUp, p.in.sample)
}

// expireLeases ends the leases and nack delays that are due.
func (p *partition) expireLeases() {
	for _, gp := range p.order {
		gp.expire(p.now)
		gp.compact()
	}
}

// appendData writes this round's publishes as one batch and completes them.
func (p *partition) appendData() {
	if len(p.in.pubs) == 0 {
		return
	}
	defer p.in.recycle(&p.t.b.bodies)
	if !p.takeDuplicates() {
		return // every publish of the round was a duplicate (dedup.go)
	}
	entries := p.in.dataEntries(p.now)
	first, err := p.data.Append(entries)
	p.in.clearEntries()
	p.appendedIDs(first, err)
	p.appendedSubjects(first, err)
	if err != nil {
		err = fmt.Errorf("topic %s partition %d: append: %w", p.t.name, p.idx, p.t.b.noteWriteErr(p.dir, err))
		for _, c := range p.in.pubs {
			done := c.pubDone
			p.commit.onCommit(func() { done.PublishDone(Position{}, err) })
		}
		_, p.last = p.data.Bounds()
		return
	}
	for i, c := range p.in.pubs {
		p.extent.appended(first+Seq(i), int64(len(c.body)))
		p.commit.confirm(c.pubDone, Position{Partition: p.idx, Seq: first + Seq(i)})
	}
	p.t.b.noteWriteOK()
	p.in.noteAppended(p.commit.stages)
	p.last = first + Seq(len(p.in.pubs)) - 1
	if !p.commit.pipelined {
		p.commit.durData = p.last
	}
}

// finishRound runs the round's completions now, or queues them until the
// round's records are durable and asks the lanes for an fsync.
func (p *partition) finishRound() {
	if p.commit.pipelined {
		p.lanes.data.want.Store(uint64(p.last))
		p.lanes.data.wantSide.Store(p.side.mark)
	}
	written := p.last > p.commit.durData || p.side.mark > p.side.durable || p.evw.last > p.eventsCovered()
	if p.commit.idle(written) {
		if len(p.commit.pending) == 0 {
			p.commit.safeLow = p.lowFrontier()
		}
		return
	}
	b := p.commit.seal(syncBatch{data: p.last, events: p.evw.last, side: p.side.mark, low: p.lowFrontier(), swap: p.swaps.round, sample: p.in.sample, appended: p.in.appended})
	if !p.commit.pipelined || (len(p.commit.pending) == 0 && p.batchDurable(&b)) {
		if err := p.syncFailure(); err != nil {
			b.fail(err)
		}
		p.commit.complete(&b)
		return
	}
	p.commit.pending = append(p.commit.pending, b)
	p.requestSync()
}

// Record meta layout in the data log: a flags byte (0 today; later
// features such as a TTL, a priority or a message id set a bit and append
// their field, so old records stay readable), the header length (uvarint),
// then the subject.
const metaV0 byte = 0

func encodeMeta(b []byte, hdrLen int, subject string) []byte {
	b = append(b, metaV0)
	b = binary.AppendUvarint(b, uint64(hdrLen))
	return append(b, subject...)
}

func decodeMeta(b []byte) (hdrLen int, subject string, err error) {
	return decodeMetaReuse(b, "")
}

// decodeMetaReuse is decodeMeta returning prev itself when the record's
// subject is prev: a partition's records mostly share one subject, and a
// delivery then costs no string allocation.
func decodeMetaReuse(b []byte, prev string) (hdrLen int, subject string, err error) {
	if len(b) == 0 || b[0] != metaV0 {
		return 0, "", fmt.Errorf("%w: record meta flags", ErrCorruptState)
	}
	h, n := binary.Uvarint(b[1:])
	if n <= 0 || h > 1<<31 {
		return 0, "", fmt.Errorf("%w: record meta", ErrCorruptState)
	}
	if sb := b[1+n:]; string(sb) != prev {
		prev = string(sb)
	}
	return int(h), prev, nil
}

// settle applies one settle command; its answer waits for the event commit.
func (p *partition) settle(c *command) {
	done := c.setDone
	gp := p.groups[c.h.Group]
	var err error
	if gp == nil {
		err = fmt.Errorf("%w: group %d not in topic %s", ErrUnknownHandle, c.h.Group, p.t.name)
	} else {
		err = gp.settle(c.h.Seq, c.h.Attempt, c.op, p.now)
	}
	if done != nil {
		p.commit.answer(done, err)
	}
}

// armTimer makes sure the actor wakes for the earliest lease end, nack
// delay, retention pass or dead-letter retry.
func (p *partition) armTimer() {
	var at int64
	for _, gp := range p.order {
		at = earliest(at, gp.nextDeadline())
	}
	if p.retentionDue() {
		at = earliest(at, p.ret.lastRun+int64(p.t.b.opts.RetentionInterval))
	}
	if p.dlqRetry {
		at = earliest(at, p.now+10e6)
	}
	if p.swaps.watching() {
		at = earliest(at, p.now+int64(p.t.b.opts.RetentionInterval))
	}
	p.timer.arm(p.clock, p.now, at, p.box.wk)
}

// publishStats copies counters for Info and backpressure.
func (p *partition) publishStats() {
	low := p.lowFrontier()
	from := p.readFrom() // purged offsets are gone for readers
	shrank := p.st.store(from, p.last, low, p.sizes.from(from), p.sizes.from(low), p.published)
	if msgs, bytes := p.in.takeReserved(); msgs > 0 {
		// Only now that the counters include this round's publishes:
		// released earlier, the topic would look emptier than it is.
		p.t.unreserve(msgs, bytes)
	}
	for _, gp := range p.order {
		p.publishGroupStats(gp)
	}
	if shrank && p.t.space.waiting() {
		p.t.space.broadcast()
	}
}

// lowFrontier is the lowest offset some group has not settled; with no
// group, the first retained offset (nothing is settled).
func (p *partition) lowFrontier() Seq {
	low := p.readFrom()
	if len(p.order) > 0 {
		low = p.order[0].frontier()
		for _, gp := range p.order[1:] {
			if f := gp.frontier(); f < low {
				low = f
			}
		}
	}
	return max(low, p.readFrom())
}

// shutdown runs on the actor after the last round: fail waiters, snapshot,
// close the logs.
func (p *partition) shutdown() {
	p.timer.halt()
	if p.commit.pipelined {
		p.lanes.halt()
		if len(p.commit.pending) > 0 {
			for _, l := range p.lanes.all() {
				upto, err := l.log.Sync()
				p.synced(l, upto, l.durableSide(), err, false) // with no error, everything is durable now
			}
		}
		p.closeCollecting() // none left with a batch pending; these are durable
	}
	for _, gp := range p.order {
		for _, w := range gp.waiters {
			if w.claim() {
				w.finish(nil, ErrClosed)
			}
		}
		gp.waiters = nil
	}
	// A partition another node serves has no state of its own to save.
	if p.role.serves() {
		if err := p.snapshot(); err != nil {
			p.t.b.logf("%v", err)
		}
	}
	p.closeStores()
}

// stop ends intake, lets the actor finish what it has, and waits for it.
func (p *partition) stop() {
	p.box.close()
	<-p.box.done
}
