package broker

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
)

type cmdKind uint8

const (
	cmdPublish cmdKind = iota + 1
	cmdSettle
	cmdPoll
)

// command is one request to a partition actor, carried by value in its ring.
type command struct {
	kind cmdKind
	// publish
	subject string
	hdrLen  int
	body    []byte   // header block followed by payload; owned by the command
	buf     *bodyBuf // body's pooled buffer, given back once appended (nil: not pooled)
	crc     uint32   // CRC-32 of body, computed once by prepare (0: the log computes it)
	pubDone PublishDone
	// reserved: the publish holds a place under the topic's
	// max_unsettled_* (Topic.reserve), given back once the round's
	// counters include it (publishStats).
	reserved bool
	// settle
	h       Handle
	op      SettleOp
	setDone func(error)
	// poll
	poll *pollWaiter
}

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

// partition is one partition of a topic and the actor that owns it. All
// fields below "actor state" are touched by the actor goroutine only.
type partition struct {
	t      *Topic
	idx    Partition
	dir    string
	data   seglog.Store
	events seglog.Store
	clock  Clock

	q       *ring // cmdQueue; concrete so commands pushed by pointer stay on the stack
	ctl     ctlStack
	wk      *waker
	room    signal // ring room, for blocked sync callers
	quit    chan struct{}
	done    chan struct{}
	pushing atomic.Int64
	closed  atomic.Bool

	// stats, written by the actor, read by anyone
	stFirst, stLast atomic.Uint64
	stUnsettled     atomic.Int64
	stBytes         atomic.Int64 // bytes of retained messages (sizeLedger)
	stUnsetBytes    atomic.Int64 // bytes of messages not settled by every group
	stPublished     atomic.Uint64
	// stRestored: events restoreSideEvents put back into the event log
	// from side copies when the broker opened (written before the actor
	// starts).
	stRestored atomic.Uint64

	// actor state
	groups      map[GroupID]*groupPart
	order       []*groupPart
	first, last Seq
	stopping    bool
	cmds        []command
	ctls        []func(*partition)
	entries     []seglog.Entry
	evEntries   []seglog.Entry
	pubs        []*command
	// resMsgs, resBytes: reservations of this round's publishes, given
	// back in publishStats.
	resMsgs, resBytes int64
	meta              []byte
	ev                evSink
	after             []func()
	now               int64
	timerAt           int64
	timerStop         func() bool
	timerFired        atomic.Bool
	snapEvents        int
	lastEventSeq      Seq
	snapSeq           Seq           // last event of the newest snapshot; History keeps those after the one before
	snapDone          chan struct{} // a snapshot is being written off the actor (snapshotAsync)
	lastRetention     int64
	askedCut          Seq // last TruncateFront point asked of the data log
	// holes: ranges of the data log lost to damage, recorded by a repair
	// (lost.go); holesLogged: the (group, hole) losses already logged.
	holes       []seglog.SkippedRange
	holesLogged map[[2]uint64]bool
	dlqRetry    bool
	totalBytes  int64 // payload bytes appended since open, for the average
	totalMsgs   int64
	published   uint64 // messages appended since open (counter)
	purgeFloor  Seq    // offsets below it were purged (Topic.Purge)
	sizes       sizeLedger
	closeErr    error // set by the actor before done closes

	// Group commit (durability "group"): the logs are written without
	// fsync and a syncer goroutine fsyncs both while the actor goes on;
	// each round's completions wait in pending until their records are
	// durable. With "sync" and "none" rounds complete at once.
	pipelined bool
	pubRes    []pubResult
	setRes    []setResult
	roundErr  error // append error of this round
	commitErr error // error of the batch whose completions run now
	// commitDataErr: the data fsync of the batch whose completions run
	// now failed; deliveries in it are not handed out.
	commitDataErr error
	minDeliv      Seq    // lowest offset delivered this round (0: none)
	lastSubject   string // subject of the last record delivered (decodeMetaReuse)
	// swaps: the data log of a compressed topic, whose replaced segment
	// maps stay until released (nil: plain). roundSwap is its SwapCount
	// when the round began; swapReleased the last count released.
	swaps        swapReleaser
	roundSwap    uint64
	swapReleased uint64
	// swapWatch: timer rounds left to look for replacements after the
	// last append (the compressor works in the background; an idle
	// partition would otherwise keep a replaced map and its file).
	swapWatch int
	// durData is the highest data offset known durable. Records up to
	// last (written) are leased at once, but a delivery is answered only
	// with its batch, once the data and the delivery's event are durable.
	durData   Seq
	durEvents Seq // highest event record known durable
	safeLow   Seq // lowest group frontier that is durable (retention)
	pending   []syncBatch
	// collecting: polls served while a commit's fsync was in flight; they
	// take what arrives until the actor learns that fsync ended (see collect).
	collecting []*pollWaiter
	// dataLane, evLane fsync the data log and the event log, each on its
	// own goroutine (syncer.go), started at its first request; nil unless
	// pipelined. syncWG counts the lanes' running goroutines.
	dataLane, evLane *syncLane
	syncStop         chan struct{}
	syncWG           sync.WaitGroup
	syncStopped      bool
	// Side copies of the events in the data log (sidecopy.go); side is
	// nil when off. sideMark: the last one written; durSide: the last
	// durable; chain: the events the latest unbroken run of side copies
	// holds; evPos: rounds whose events the event log has not made durable
	// yet.
	side              seglog.SideStore
	sideReady         bool
	sideFailed        bool // the last side copy's write failed (logged)
	firstEv           Seq  // first event record written since Open
	sideMark, durSide uint64
	chain             sideChain
	evPos             []evPos
	sideBuf, evMeta   []byte
	evSyncAt          int64 // when the event lane was last asked

	sleep logSleep // the open-logs cache (idle.go)
}

// pubResult is a publish completion waiting for its batch to be durable.
type pubResult struct {
	done PublishDone
	pos  Position
}

// setResult is a settle completion waiting for its round's events to be
// durable; err is the settle's own outcome (the commit's is added then).
type setResult struct {
	done func(error)
	err  error
}

// syncBatch is one round's completions, run once data up to data and
// events up to events are durable.
type syncBatch struct {
	data, events Seq
	side         uint64 // side copies up to this mark must be durable
	low          Seq    // lowest group frontier after the round
	minDeliv     Seq    // lowest offset delivered in the round (0: none)
	swap         uint64 // the data log's SwapCount before the round read anything
	err          error  // the round's events (or their fsync) failed
	dataErr      error  // publishes are not confirmed, deliveries not handed out (fail)
	pubs         []pubResult
	sets         []setResult
	after        []func()
}

// fail makes every completion of b report err: a fsync of either log has
// failed, and the partition confirms nothing more.
func (b *syncBatch) fail(err error) { b.dataErr, b.err = err, cmp.Or(b.err, err) }

// push hands a command to the actor without blocking.
func (p *partition) push(c *command) error {
	p.pushing.Add(1)
	defer p.pushing.Add(-1)
	if p.closed.Load() {
		return ErrClosed
	}
	if !p.q.push(c) {
		return ErrQueueFull
	}
	p.wk.wake()
	return nil
}

// control runs fn on the actor. It never fails; fn is dropped if the actor
// has stopped (and then it must not matter).
func (p *partition) control(fn func(p *partition)) {
	p.ctl.push(fn)
	p.wk.wake()
}

// run is the actor loop: take what arrived, process it as one round, park
// when a round found nothing to do.
func (p *partition) run() {
	defer close(p.done)
	for {
		p.cmds = p.q.drain(p.cmds[:0], p.t.b.opts.MaxBatch)
		p.ctls = p.ctl.takeAll(p.ctls[:0])
		idle := len(p.cmds) == 0 && len(p.ctls) == 0
		if p.wakeForRound(idle) {
			p.round()
		}
		if p.room.waiting() {
			p.room.broadcast()
		}
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
		p.wk.sleeping.Store(true)
		if !p.q.empty() || !p.ctl.empty() {
			p.wk.sleeping.Store(false)
			continue
		}
		select {
		case <-p.wk.ch:
		case <-p.quit:
			p.stopping = true
		}
		p.wk.sleeping.Store(false)
	}
}

// round processes one batch: control closures, publishes (one append),
// settles and polls, lease expiry, dead-lettering, dispatch to waiters, one
// event append, then every completion.
func (p *partition) round() {
	p.now = p.clock.Now().UnixNano()
	if p.swaps != nil {
		p.roundSwap = p.swaps.SwapCount() // before anything of the round reads
	}
	p.roundErr, p.minDeliv = nil, 0
	if p.timerFired.Swap(false) {
		p.timerAt = 0
	}
	for i, fn := range p.ctls {
		fn(p)
		p.ctls[i] = nil
	}
	p.pubs = p.pubs[:0]
	for i := range p.cmds {
		c := &p.cmds[i]
		switch c.kind {
		case cmdPublish:
			p.pubs = append(p.pubs, c)
			if c.reserved {
				p.resMsgs++
				p.resBytes += int64(len(c.body))
			}
		case cmdSettle:
			p.settle(c)
		case cmdPoll:
			p.addPoll(c.poll)
		}
	}
	if len(p.pubs) > 0 {
		p.appendData()
		p.swapWatch = swapWatchRounds
	} else if p.swapWatch > 0 {
		p.swapWatch--
	}
	for _, gp := range p.order {
		gp.expire(p.now)
		gp.compact()
	}
	p.sendDeadLetters()
	p.dispatch()
	p.commitEvents()
	p.finishRound()
	for i := range p.cmds {
		p.cmds[i] = command{}
	}
	p.releaseSwapped()
	p.retain()
	p.publishStats()
	p.armTimer()
}

// appendData writes this round's publishes as one batch and completes them.
func (p *partition) appendData() {
	defer p.recycleBodies()
	need := 0
	for _, c := range p.pubs {
		need += 1 + binary.MaxVarintLen64 + len(c.subject)
	}
	if cap(p.meta) < need {
		p.meta = make([]byte, 0, need)
	}
	m := p.meta[:0]
	p.entries = p.entries[:0]
	for _, c := range p.pubs {
		start := len(m)
		m = encodeMeta(m, c.hdrLen, c.subject)
		p.entries = append(p.entries, seglog.Entry{Meta: m[start:len(m):len(m)], Data: c.body, Time: p.now, CRC: c.crc})
	}
	var t0 time.Time
	observe := !p.pipelined && p.t.cfg.Durability != DurabilityNone
	if observe {
		t0 = time.Now()
	}
	first, err := p.data.Append(p.entries)
	if observe && err == nil {
		p.t.b.observeSync(time.Since(t0), len(p.entries))
	}
	for i := range p.entries {
		p.entries[i] = seglog.Entry{}
	}
	if err != nil {
		err = fmt.Errorf("topic %s partition %d: append: %w", p.t.name, p.idx, p.t.b.noteWriteErr(p.dir, err))
		for _, c := range p.pubs {
			done := c.pubDone
			p.after = append(p.after, func() { done.PublishDone(Position{}, err) })
		}
		_, p.last = p.data.Bounds()
		return
	}
	for i, c := range p.pubs {
		p.totalBytes += int64(len(c.body))
		p.totalMsgs++
		p.sizes.add(first+Seq(i), int64(len(c.body)))
		p.pubRes = append(p.pubRes, pubResult{done: c.pubDone, pos: Position{Partition: p.idx, Seq: first + Seq(i)}})
	}
	p.t.b.noteWriteOK()
	p.last = first + Seq(len(p.pubs)) - 1
	p.published += uint64(len(p.pubs))
	if !p.pipelined {
		p.durData = p.last
	}
}

// recycleBodies gives the round's publish buffers back to the pool once
// the log has copied them (or refused them): nothing refers to their
// bytes after that.
func (p *partition) recycleBodies() {
	for _, c := range p.pubs {
		p.t.b.bodies.put(c.buf)
		c.buf, c.body = nil, nil
	}
}

// finishRound runs the round's completions now, or queues them until the
// round's records are durable and asks the syncer for an fsync.
func (p *partition) finishRound() {
	if p.pipelined {
		p.dataLane.want.Store(uint64(p.last))
		p.dataLane.wantSide.Store(p.sideMark)
	}
	written := p.last > p.durData || p.sideMark > p.durSide || p.lastEventSeq > p.eventsCovered()
	if len(p.pubRes) == 0 && len(p.setRes) == 0 && len(p.after) == 0 && p.roundErr == nil && (!p.pipelined || !written) {
		if len(p.pending) == 0 {
			p.safeLow = p.lowFrontier()
		}
		return
	}
	b := syncBatch{data: p.last, events: p.lastEventSeq, side: p.sideMark, low: p.lowFrontier(), minDeliv: p.minDeliv, swap: p.roundSwap,
		err: p.roundErr, pubs: p.pubRes, sets: p.setRes, after: p.after}
	p.pubRes, p.setRes, p.after = nil, nil, nil
	if !p.pipelined || (len(p.pending) == 0 && p.batchDurable(&b)) {
		if err := p.syncFailure(); err != nil {
			b.fail(err)
		}
		p.complete(&b)
		return
	}
	p.pending = append(p.pending, b)
	p.requestSync()
}

// complete runs a batch's completions; p.commitErr tells them the outcome.
func (p *partition) complete(b *syncBatch) {
	p.commitErr, p.commitDataErr = b.err, b.dataErr
	for _, r := range b.pubs {
		// the data is durable even if the round's events failed
		if b.dataErr != nil {
			r.done.PublishDone(Position{}, b.dataErr)
		} else {
			r.done.PublishDone(r.pos, nil)
		}
	}
	for _, r := range b.sets {
		err := r.err
		if err == nil {
			err = p.commitErr
		}
		r.done(err)
	}
	for _, fn := range b.after {
		fn()
	}
	p.commitErr, p.commitDataErr = nil, nil
	if b.err == nil {
		p.safeLow = b.low
	}
	// keep the slices for the next rounds
	clear(b.pubs)
	clear(b.sets)
	clear(b.after)
	if p.pubRes == nil {
		p.pubRes = b.pubs[:0]
	}
	if p.setRes == nil {
		p.setRes = b.sets[:0]
	}
	if p.after == nil {
		p.after = b.after[:0]
	}
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
		p.setRes = append(p.setRes, setResult{done: done, err: err}) // no closure: one settle per acked message
	}
}

// commitEvents appends this round's events as one record. A failure is
// reported to the settle callers of this round.
func (p *partition) commitEvents() {
	if len(p.ev.b) == 0 {
		return
	}
	p.evEntries = p.evEntries[:0]
	if p.side != nil {
		p.evMeta = encodeEventMeta(p.evMeta[:0], p.last+1) // where the side copy goes
	}
	from := 0
	for _, cut := range append(p.ev.cuts, len(p.ev.b)) {
		p.evEntries = append(p.evEntries, seglog.Entry{Meta: p.evMeta, Data: p.ev.b[from:cut], Time: p.now})
		from = cut
	}
	first, err := p.events.Append(p.evEntries)
	if err == nil && p.side != nil {
		p.writeSideCopy(first, p.evEntries, p.last+1)
	}
	clear(p.evEntries)
	if err != nil {
		full := isDiskFull(err)
		p.roundErr = fmt.Errorf("topic %s partition %d: event log: %w", p.t.name, p.idx, p.t.b.noteWriteErr(p.dir, err))
		if !full {
			p.t.b.logf("%v", p.roundErr) // a full disk is reported once per episode
		}
		// The state changes are made; keep their events and write them
		// ahead of the next round's, so a log that recovers (disk space
		// returns) still records them. Past a bound, the next snapshot
		// (which holds the whole state) has to do.
		if len(p.ev.b) > maxRetainedEvents {
			p.t.b.logf("topic %s partition %d: dropping %d unwritten events; the next snapshot records their state", p.t.name, p.idx, p.ev.n)
			p.snapEvents += p.ev.n
			p.ev.b, p.ev.n, p.ev.cuts, p.ev.from = p.ev.b[:0], 0, p.ev.cuts[:0], 0
		}
		return
	}
	seq := first + Seq(len(p.evEntries)) - 1
	p.snapEvents += p.ev.n
	p.ev.b, p.ev.n, p.ev.cuts, p.ev.from = p.ev.b[:0], 0, p.ev.cuts[:0], 0
	p.lastEventSeq = seq
	if !p.pipelined {
		p.durEvents = seq
	}
	if p.snapEvents >= p.t.b.opts.SnapshotEvery && p.snapDone == nil {
		p.snapshotAsync()
	}
}

// maxRetainedEvents bounds the events kept in memory while the event log
// refuses writes.
const maxRetainedEvents = 64 << 20

// snapshot writes the consumer state and drops the events it covers, on
// the actor (shutdown). A background snapshot still running is waited for
// first.
func (p *partition) snapshot() error {
	p.waitSnapshot()
	seq, prev := p.lastEventSeq, p.snapSeq
	p.snapEvents = 0
	if err := p.writeSnapshot(p.encodeSnapshot(), seq, prev); err != nil {
		return err
	}
	p.snapSeq = seq
	return nil
}

// snapshotAsync encodes the consumer state on the actor (cheap: frontiers,
// spans and the leased or delayed offsets) and writes it on a goroutine of
// its own, so the fsyncs, the rename and the event-log truncation do not
// stall the partition's rounds. One runs at a time; the next is due
// SnapshotEvery events after this one started.
func (p *partition) snapshotAsync() {
	seq, prev := p.lastEventSeq, p.snapSeq
	data := p.encodeSnapshot()
	p.snapEvents = 0
	done := make(chan struct{})
	p.snapDone = done
	go func() {
		defer close(done)
		err := p.writeSnapshot(data, seq, prev)
		p.control(func(p *partition) {
			if p.snapDone == done {
				p.snapDone = nil
			}
			if err != nil {
				p.t.b.logf("%v", err)
				return
			}
			p.snapSeq = max(p.snapSeq, seq)
		})
	}()
}

// waitSnapshot waits for a background snapshot (actor only).
func (p *partition) waitSnapshot() {
	if p.snapDone != nil {
		<-p.snapDone
		p.snapDone = nil
	}
}

// encodeSnapshot is the state as of event lastEventSeq (actor only).
func (p *partition) encodeSnapshot() []byte {
	gs := make([]*groupState, 0, len(p.order)+1)
	if p.purgeFloor > 0 {
		// Group id 0 is never a real group: it carries the purge floor.
		gs = append(gs, newGroupState(0, 0, 0, p.purgeFloor))
	}
	for _, gp := range p.order {
		gs = append(gs, gp.groupState)
	}
	return encodeSnapshot(p.lastEventSeq, gs)
}

// writeSnapshot makes the events up to seq durable, writes data (the
// state as of seq) and drops the events the previous snapshot (prev)
// covered, so the history of recent messages survives a snapshot (and the
// one every Close writes). Safe off the actor: the event log allows Sync
// and TruncateFront beside the actor's appends.
func (p *partition) writeSnapshot(data []byte, seq, prev Seq) error {
	if p.pipelined {
		// The snapshot covers events up to seq: they must be on disk
		// first, or a crash could leave the log short of the snapshot.
		if _, err := p.events.Sync(); err != nil {
			return fmt.Errorf("topic %s partition %d: snapshot: sync events: %w", p.t.name, p.idx, err)
		}
	}
	if err := writeFileAtomic(p.dir, snapName, data); err != nil {
		return fmt.Errorf("topic %s partition %d: snapshot: %w", p.t.name, p.idx, err)
	}
	if seq == prev {
		return nil // nothing new: keep the window History reads
	}
	if err := p.events.TruncateFront(prev + 1); err != nil {
		return fmt.Errorf("topic %s partition %d: truncate events: %w", p.t.name, p.idx, err)
	}
	return nil
}

// armTimer makes sure the actor wakes for the earliest lease end, nack
// delay, retention pass or dead-letter retry.
func (p *partition) armTimer() {
	var at int64
	min := func(t int64) {
		if t != 0 && (at == 0 || t < at) {
			at = t
		}
	}
	for _, gp := range p.order {
		min(gp.nextDeadline())
	}
	if p.retentionDue() {
		min(p.lastRetention + int64(p.t.b.opts.RetentionInterval))
	}
	if p.dlqRetry {
		min(p.now + 10e6)
	}
	if p.swaps != nil && (p.swapWatch > 0 || p.swaps.SwapCount() > p.swapReleased) {
		min(p.now + int64(p.t.b.opts.RetentionInterval))
	}
	if at == 0 || (p.timerAt != 0 && p.timerAt <= at) {
		return
	}
	if p.timerStop != nil {
		p.timerStop()
	}
	p.timerAt = at
	d := at - p.now
	if d < 0 {
		d = 0
	}
	p.timerStop = p.clock.AfterFunc(durationNs(d), func() {
		p.timerFired.Store(true)
		p.wk.kick()
	})
}

// publishStats copies counters for Info and backpressure.
func (p *partition) publishStats() {
	p.stFirst.Store(uint64(max(p.first, p.purgeFloor))) // purged offsets are gone for readers
	p.stLast.Store(uint64(p.last))
	low := p.lowFrontier()
	var unsettled int64
	if p.last >= low {
		unsettled = int64(p.last - low + 1)
	}
	old := p.stUnsettled.Swap(unsettled)
	p.stBytes.Store(p.sizes.from(max(p.first, p.purgeFloor)))
	p.stUnsetBytes.Store(p.sizes.from(low))
	if p.resMsgs > 0 {
		// Only now that the counters include this round's publishes:
		// released earlier, the topic would look emptier than it is.
		p.t.unreserve(p.resMsgs, p.resBytes)
		p.resMsgs, p.resBytes = 0, 0
	}
	p.stPublished.Store(p.published)
	for _, gp := range p.order {
		p.publishGroupStats(gp)
	}
	if unsettled < old && p.t.space.waiting() {
		p.t.space.broadcast()
	}
}

func (p *partition) avgSize() int64 {
	if p.totalMsgs == 0 {
		return 0
	}
	return p.totalBytes / p.totalMsgs
}

// lowFrontier is the lowest offset some group has not settled; with no
// group, the first retained offset (nothing is settled).
func (p *partition) lowFrontier() Seq {
	low := max(p.first, p.purgeFloor)
	if len(p.order) > 0 {
		low = p.order[0].frontier()
		for _, gp := range p.order[1:] {
			if f := gp.frontier(); f < low {
				low = f
			}
		}
	}
	return max(low, p.first, p.purgeFloor)
}

// shutdown runs on the actor after the last round: fail waiters, snapshot,
// close the logs.
func (p *partition) shutdown() {
	if p.timerStop != nil {
		p.timerStop()
	}
	if p.pipelined {
		close(p.syncStop)
		p.syncWG.Wait()
		p.syncStopped = true
		if len(p.pending) > 0 {
			for _, l := range p.lanes() {
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
	if err := p.snapshot(); err != nil {
		p.t.b.logf("%v", err)
	}
	p.closeStores()
}

// stop ends intake, lets the actor finish what it has, and waits for it.
func (p *partition) stop() {
	p.closed.Store(true)
	for p.pushing.Load() != 0 {
		runtime.Gosched() // a producer is between its closed check and its push
	}
	close(p.quit)
	<-p.done
}
