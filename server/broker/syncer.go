package broker

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
	"github.com/fibrilmq/fibril/server/stagetime"
)

// The partition's commit: the one owner of fsync for durability group and
// sync (the logs are seglog.PolicyCaller and never fsync on their own
// except to seal a segment). Under group the lanes below fsync behind the
// actor; under sync the actor fsyncs through them itself at the end of
// each round (syncRound), and no lane goroutine starts. Either way a
// batch's completions run only once a Sync has covered its records, and
// after a failed fsync of either log nothing more is confirmed.

// syncLane fsyncs one of the partition's two logs (the data log or the
// event log) when the actor asks, and hands the durable point back through
// the control stack. The two lanes run independently: a data fsync never
// waits for an event-log fsync to end (rounds that only settle write only
// events; with one syncer for both logs, the publishes of the next round
// waited for that fsync before their own could start), and the other way
// round. A batch of completions still waits for both of its points.
type syncLane struct {
	log  seglog.Store
	data bool // the data log: its fsyncs count the messages they make durable
	// want, wantSide: what the actor has written to the log (records,
	// side records), up to the end of its last round (the lane goes on
	// fsyncing while the log is behind it).
	want, wantSide atomic.Uint64
	req            chan struct{} // capacity 1; one request outstanding at a time (busy)
	// start runs the lane's goroutine (partition.startLane); the actor
	// calls it at the lane's first request, so a partition whose log is
	// never written costs no goroutine for it (started, actor).
	start   func()
	started bool
	// busy (actor): the lane was asked and has not yet reported with
	// more=false.
	busy bool
	// failed (actor): the error of the lane's first failed fsync. The log
	// refuses to report anything durable after it, and the partition
	// confirms nothing more (synced).
	failed error
	// span: the last fsync's (whoever runs syncLog: the lane goroutine,
	// or the actor under durability sync), for the stage accounting.
	span fsyncSpan
}

func newSyncLane(log seglog.Store, data bool) *syncLane {
	return &syncLane{log: log, data: data, req: make(chan struct{}, 1)}
}

// durableSide is the lane's durable side mark (0 for the event log, and
// for a data log without side records).
func (l *syncLane) durableSide() uint64 {
	if !l.data {
		return 0
	}
	return l.log.DurableSide()
}

// request asks the lane for an fsync unless it is already at one or the
// log has nothing the actor does not know to be durable.
func (l *syncLane) request(behind bool) {
	if l.busy || !behind {
		return
	}
	l.busy = true
	if !l.started {
		l.started = true
		l.start()
	}
	l.req <- struct{}{}
}

// behind reports whether the log has records written by a finished round
// that are not durable yet.
func (l *syncLane) behind() bool {
	return l.log.Durable() < Seq(l.want.Load()) || l.durableSide() < l.wantSide.Load()
}

// syncLanes are a partition's two fsync lanes and what stops them.
type syncLanes struct {
	// data, ev fsync the data log and the event log; under group each on
	// its own goroutine, started at its first request; nil unless
	// pipelined.
	data, ev *syncLane
	stop     chan struct{}  // closed by halt
	wg       sync.WaitGroup // the lanes' running goroutines
	stopped  bool           // (actor) halt has run: ask nothing more
}

func (s *syncLanes) all() [2]*syncLane { return [2]*syncLane{s.data, s.ev} }

// start runs loop(l) on a goroutine of its own; halt waits for it.
func (s *syncLanes) start(l *syncLane, loop func(*syncLane)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		loop(l)
	}()
}

// stopRequested reports whether halt has begun (any goroutine).
func (s *syncLanes) stopRequested() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// halt (actor) stops the lanes and waits for their goroutines.
func (s *syncLanes) halt() {
	close(s.stop)
	s.wg.Wait()
	s.stopped = true
}

// startLane (actor) runs l's goroutine until the partition shuts down.
func (p *partition) startLane(l *syncLane) { p.lanes.start(l, p.syncLoop) }

// syncLoop is one lane: while the actor has written more than the last
// fsync covered, it starts the next fsync at once instead of waiting for the
// actor to take the result and ask again (an actor busy with a long round,
// the completions of a slow fsync, must not hold up the fsync that its next
// confirms wait for).
func (p *partition) syncLoop(l *syncLane) {
	for {
		select {
		case <-l.req:
		case <-p.lanes.stop:
			return
		}
		for more := true; more; {
			upto, side, err := p.syncLog(l)
			more = err == nil && !p.lanes.stopRequested() && l.behind()
			span := l.span
			p.control(func(p *partition) { p.noteSpan(l, span); p.synced(l, upto, side, err, more) })
		}
	}
}

// syncLog fsyncs l's log and returns its durable point and side mark,
// counting the fsync in the broker's statistics. Safe off the actor.
func (p *partition) syncLog(l *syncLane) (Seq, uint64, error) {
	before := l.log.Durable()
	t0 := time.Now()
	upto, err := l.log.Sync()
	t1 := time.Now()
	side := l.durableSide()
	l.span = fsyncSpan{start: stagetime.Mono(t0), end: stagetime.Mono(t1)}
	if err == nil {
		recs := 0
		if l.data {
			recs = int(max(upto, before) - before)
		}
		p.t.b.observeSync(t1.Sub(t0), recs)
	}
	return upto, side, err
}

// requestSync asks each lane whose log holds records not known durable
// for an fsync (the lanes' want: stored by finishRound). Under durability
// sync the actor fsyncs at once instead (syncRound).
func (p *partition) requestSync() {
	if p.lanes.stopped {
		return
	}
	if p.t.cfg.Durability == DurabilitySync {
		p.syncRound()
		return
	}
	p.lanes.data.request(p.commit.durData < p.last || p.side.durable < p.side.mark)
	p.requestEventSync()
}

// syncRound (actor; durability sync) fsyncs, on the actor, each log the
// round wrote and runs the completions that are then durable, before the
// next round starts: a round costs one fsync per log it wrote (two when it
// both publishes and settles), no fsync is shared between rounds, and no
// lane goroutine runs. Side copies are off under sync (openSideCopies), so
// the round's events are durable only in the event log.
func (p *partition) syncRound() {
	need := [2]bool{p.commit.durData < p.last || p.side.durable < p.side.mark, p.commit.durEvents < p.evw.last}
	for i, l := range p.lanes.all() {
		if need[i] {
			upto, side, err := p.syncLog(l)
			p.noteSpan(l, l.span)
			p.tookSync(l, upto, side, err, false)
		}
	}
	// Sync covers everything written before it, so nothing is left
	// pending (a store that broke that promise would leave the batch
	// to the next round's fsync).
	p.completeDurable()
}

// synced (actor) takes a lane's result and completes every batch that is
// now durable. After a failed fsync of either log (which then refuses to
// report anything durable) every pending batch fails, and so does every
// later one: nothing more is confirmed or handed out, not even a publish
// whose data did reach the disk. more: the lane has already started its
// next fsync and will report again. side: the data log's durable side mark.
func (p *partition) synced(l *syncLane, upto Seq, side uint64, err error, more bool) {
	if l != p.lanes.data && l != p.lanes.ev {
		return // a lane of state dropped since (role.go: rebuild)
	}
	p.tookSync(l, upto, side, err, more)
	p.completeDurable()
	if len(p.commit.pending) > 0 {
		p.requestSync()
	}
	p.releaseSwapped()
}

// noteSpan (actor) keeps the span of a data fsync for the stage
// accounting of the batches it completes.
func (p *partition) noteSpan(l *syncLane, s fsyncSpan) {
	if l == p.lanes.data {
		p.commit.lastData = s
	}
}

// tookSync (actor) takes a lane's result: its durable point, or its
// failure.
func (p *partition) tookSync(l *syncLane, upto Seq, side uint64, err error, more bool) {
	l.busy = more
	if l == p.lanes.data {
		// the fsync in flight when they were served has ended
		p.closeCollecting()
	}
	switch {
	case err != nil:
		if l.failed == nil {
			l.failed = err
		}
	case l == p.lanes.data:
		p.commit.durData = max(p.commit.durData, upto)
		p.side.durable = max(p.side.durable, side)
	default:
		p.eventsDurable(upto)
	}
}

// completeDurable (actor) completes the pending batches that are durable
// now, oldest first, or every one of them after a failed fsync.
func (p *partition) completeDurable() {
	p.commit.drain(p.syncFailure(), p.batchDurable)
}

// syncFailure is the first failed fsync of the partition's logs, with
// context, or nil.
func (p *partition) syncFailure() error {
	if !p.commit.pipelined {
		return nil
	}
	if err := p.lanes.data.failed; err != nil {
		return fmt.Errorf("topic %s partition %d: sync data: %w", p.t.name, p.idx, err)
	}
	if err := p.lanes.ev.failed; err != nil {
		return fmt.Errorf("topic %s partition %d: sync events: %w", p.t.name, p.idx, err)
	}
	return nil
}
