package broker

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"

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
	body    []byte // header block followed by payload; owned by the command
	pubDone func(Position, error)
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

	stInflight atomic.Int64
	stPending  atomic.Int64 // retained, not settled (ready + inflight + unseen)
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

	q       cmdQueue
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
	stBytes         atomic.Int64 // bytes of retained records (approximate)
	stAvg           atomic.Int64 // average record size

	// actor state
	groups        map[GroupID]*groupPart
	order         []*groupPart
	first, last   Seq
	stopping      bool
	cmds          []command
	ctls          []func(*partition)
	entries       []seglog.Entry
	pubs          []*command
	meta          []byte
	ev            evSink
	after         []func()
	now           int64
	timerAt       int64
	timerStop     func() bool
	timerFired    atomic.Bool
	snapEvents    int
	lastEventSeq  Seq
	lastRetention int64
	dlqRetry      bool
	totalBytes    int64 // payload bytes appended since open, for the average
	totalMsgs     int64
	evErr         error // this round's event commit error
	closeErr      error // set by the actor before done closes
}

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
		p.round()
		if p.room.waiting() {
			p.room.broadcast()
		}
		if !idle {
			continue
		}
		if p.stopping {
			p.shutdown()
			return
		}
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
		case cmdSettle:
			p.settle(c)
		case cmdPoll:
			p.addPoll(c.poll)
		}
	}
	if len(p.pubs) > 0 {
		p.appendData()
	}
	for _, gp := range p.order {
		gp.expire(p.now)
	}
	p.sendDeadLetters()
	p.dispatch()
	p.commitEvents()
	for i, fn := range p.after {
		fn()
		p.after[i] = nil
	}
	p.after = p.after[:0]
	for i := range p.cmds {
		p.cmds[i] = command{}
	}
	p.retain()
	p.publishStats()
	p.armTimer()
}

// appendData writes this round's publishes as one batch and completes them.
func (p *partition) appendData() {
	need := 0
	for _, c := range p.pubs {
		need += binary.MaxVarintLen64 + len(c.subject)
	}
	if cap(p.meta) < need {
		p.meta = make([]byte, 0, need)
	}
	m := p.meta[:0]
	p.entries = p.entries[:0]
	for _, c := range p.pubs {
		start := len(m)
		m = encodeMeta(m, c.hdrLen, c.subject)
		p.entries = append(p.entries, seglog.Entry{Meta: m[start:len(m):len(m)], Data: c.body, Time: p.now})
	}
	first, err := p.data.Append(p.entries)
	for i := range p.entries {
		p.entries[i] = seglog.Entry{}
	}
	if err != nil {
		err = fmt.Errorf("topic %s partition %d: append: %w", p.t.name, p.idx, err)
		for _, c := range p.pubs {
			c.pubDone(Position{}, err)
		}
		_, p.last = p.data.Bounds()
		return
	}
	for i, c := range p.pubs {
		p.totalBytes += int64(len(c.body))
		p.totalMsgs++
		c.pubDone(Position{Partition: p.idx, Seq: first + Seq(i)}, nil)
	}
	p.last = first + Seq(len(p.pubs)) - 1
}

func encodeMeta(b []byte, hdrLen int, subject string) []byte {
	b = binary.AppendUvarint(b, uint64(hdrLen))
	return append(b, subject...)
}

func decodeMeta(b []byte) (hdrLen int, subject string, err error) {
	h, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, "", fmt.Errorf("%w: record meta", ErrCorruptState)
	}
	return int(h), string(b[n:]), nil
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
		p.after = append(p.after, func() {
			if err == nil {
				err = p.evErr
			}
			done(err)
		})
	}
}

// commitEvents appends this round's events as one record. A failure is
// reported to the settle callers of this round.
func (p *partition) commitEvents() {
	p.evErr = nil
	if len(p.ev.b) == 0 {
		return
	}
	seq, err := p.events.Append([]seglog.Entry{{Data: p.ev.b, Time: p.now}})
	p.snapEvents += p.ev.n
	p.ev.b, p.ev.n = p.ev.b[:0], 0
	if err != nil {
		p.evErr = fmt.Errorf("topic %s partition %d: event log: %w", p.t.name, p.idx, err)
		p.t.b.logf("%v", p.evErr)
		return
	}
	p.lastEventSeq = seq
	if p.snapEvents >= p.t.b.opts.SnapshotEvery {
		if err := p.snapshot(); err != nil {
			p.t.b.logf("%v", err)
		}
	}
}

// snapshot writes the consumer state and drops the events it covers.
func (p *partition) snapshot() error {
	gs := make([]*groupState, 0, len(p.order))
	for _, gp := range p.order {
		gs = append(gs, gp.groupState)
	}
	if err := writeFileAtomic(p.dir, snapName, encodeSnapshot(p.lastEventSeq, gs)); err != nil {
		return fmt.Errorf("topic %s partition %d: snapshot: %w", p.t.name, p.idx, err)
	}
	p.snapEvents = 0
	if err := p.events.TruncateFront(p.lastEventSeq + 1); err != nil {
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
	p.stFirst.Store(uint64(p.first))
	p.stLast.Store(uint64(p.last))
	low := p.lowFrontier()
	var unsettled int64
	if p.last >= low {
		unsettled = int64(p.last - low + 1)
	}
	old := p.stUnsettled.Swap(unsettled)
	retained := int64(0)
	if p.last >= p.first {
		retained = int64(p.last - p.first + 1)
	}
	p.stAvg.Store(p.avgSize())
	p.stBytes.Store(retained * p.avgSize())
	for _, gp := range p.order {
		gp.stInflight.Store(int64(gp.nInflight))
		f := gp.frontier()
		if f < p.first {
			f = p.first
		}
		pend := int64(0)
		if p.last >= f {
			pend = int64(p.last - f + 1)
		}
		gp.stPending.Store(pend)
	}
	if unsettled < old && p.t.space.waiting() {
		p.t.space.broadcast()
	}
}

func (p *partition) avgSizeShared() int64 { return p.stAvg.Load() }

func (p *partition) avgSize() int64 {
	if p.totalMsgs == 0 {
		return 0
	}
	return p.totalBytes / p.totalMsgs
}

// lowFrontier is the lowest offset some group has not settled; with no
// group, the first retained offset (nothing is settled).
func (p *partition) lowFrontier() Seq {
	low := p.first
	if len(p.order) > 0 {
		low = p.order[0].frontier()
		for _, gp := range p.order[1:] {
			if f := gp.frontier(); f < low {
				low = f
			}
		}
	}
	if low < p.first {
		low = p.first
	}
	return low
}

// shutdown runs on the actor after the last round: fail waiters, snapshot,
// close the logs.
func (p *partition) shutdown() {
	if p.timerStop != nil {
		p.timerStop()
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
