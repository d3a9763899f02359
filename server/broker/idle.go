package broker

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/fibrilmq/fibril/server/seglog"

	"golang.org/x/sys/unix"
)

// The open-logs cache. A partition's two logs hold four descriptors while
// open (each log's LOCK file, which also carries its durable and front
// hints, and its active segment), so a broker with many topics would run
// into RLIMIT_NOFILE. The broker keeps at most Options.MaxOpenPartitions
// partitions' logs open: when one more opens, the least recently used
// partitions are asked to close theirs. A partition asked closes them once
// it is idle (no command, no timer armed, nothing waiting for an fsync, no
// parked poll, subscription or background snapshot; a partition that is
// not idle stays open, so the bound is soft), keeps its consumer state in
// memory and its actor goroutine parked, and reopens them (a quick open:
// the clean-shutdown marker and the verified mark spare it the scan) at
// the start of its next round that has work. If that reopen fails (the
// open-files limit itself), the round's commands are answered with the
// error (too_many_files for EMFILE, counted and logged by noteFileErr) and
// the next round tries again.
//
// The broker's own LOCK file (brokerLock) keeps a second broker off the
// directory while partitions' logs, and with them their own locks, are
// closed.
//
// Only file-backed logs (seglog.Log) are closed; a partition on
// Options.OpenStore stores never is.

// fdsPerPartition is what one partition's open logs hold.
const fdsPerPartition = 4

// defaultMaxOpenPartitions: half the soft RLIMIT_NOFILE for partitions'
// logs (the rest for connections, the catalog, snapshots being written),
// at least 64.
func defaultMaxOpenPartitions() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return 1 << 16
	}
	return max(64, int(min(rl.Cur, 1<<30)/2/fdsPerPartition))
}

// logCache counts the partitions whose logs are open and picks the ones
// to close.
type logCache struct {
	max  int
	mu   sync.Mutex
	open map[*partition]struct{}
}

// opened records that p's logs are open and, past the bound, returns the
// least recently used others, to be asked to close theirs (down to 7/8 of
// the bound, so a scan is amortized over many opens).
func (c *logCache) opened(p *partition) []*partition {
	p.sleep.used.Store(p.clock.Now().UnixNano())
	c.mu.Lock()
	if c.open == nil {
		c.open = map[*partition]struct{}{}
	}
	c.open[p] = struct{}{}
	var victims []*partition
	if len(c.open) > c.max {
		type cand struct {
			p    *partition
			used int64
		}
		cs := make([]cand, 0, len(c.open))
		for q := range c.open {
			if q != p && !q.sleep.asked.Load() {
				cs = append(cs, cand{q, q.sleep.used.Load()})
			}
		}
		slices.SortFunc(cs, func(a, b cand) int { return cmp.Compare(a.used, b.used) })
		for _, x := range cs[:min(len(cs), len(c.open)-c.max*7/8)] {
			victims = append(victims, x.p)
		}
	}
	c.mu.Unlock()
	return victims
}

// cacheOpened records t's partitions as open and has the partitions the
// cache picks close their logs: at once when their actors have not started
// (Open: so a broker with more partitions than the bound never holds all
// their logs open), else when they are next idle.
func (b *Broker) cacheOpened(t *Topic, started bool) {
	for _, p := range t.parts {
		if !p.cachedStores() {
			continue
		}
		for _, q := range b.logs.opened(p) {
			if !started {
				if ok, wakeAt := q.sleepable(); ok {
					q.closeForSleep(wakeAt)
					continue
				}
			}
			q.sleep.asked.Store(true)
			q.box.wk.kick()
		}
	}
}

// closed records that p's logs are closed.
func (c *logCache) closed(p *partition) {
	c.mu.Lock()
	delete(c.open, p)
	c.mu.Unlock()
}

// count is the number of partitions with open logs.
func (c *logCache) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.open)
}

// OpenPartitions returns how many partitions hold their logs open now.
func (b *Broker) OpenPartitions() int { return b.logs.count() }

// logSleep is a partition's part in the cache.
type logSleep struct {
	// mu guards data and events against readers off the actor (the
	// scrub) while the actor swaps them; the actor itself reads them
	// without it.
	mu     sync.Mutex
	asleep atomic.Bool  // the logs are closed (written by the actor under mu)
	asked  atomic.Bool  // the cache asked for them to be closed
	used   atomic.Int64 // when the partition's last round ran (unix ns)
	err    error        // actor: why the last reopen failed
}

// cachedStores reports whether p's logs may be closed while idle.
func (p *partition) cachedStores() bool {
	_, ok := p.data.(*seglog.Log)
	return ok && p.t.b.opts.OpenStore == nil
}

// wakeForRound (actor, before a round) reopens a sleeping partition's
// logs if the round has work. It returns false when the round must not
// run: asleep with nothing to do, or the reopen failed (the commands are
// then answered with the error).
func (p *partition) wakeForRound(idle bool) bool {
	if !p.sleep.asleep.Load() {
		p.sleep.used.Store(p.now) // the last round's time: no clock read here
		return true
	}
	if idle && !p.timer.fired.Load() {
		return false
	}
	if err := p.reopenLogs(); err != nil {
		p.failAsleep(err)
		return false
	}
	return true
}

// sleepIfAsked (actor, idle, before it parks) closes the logs if the cache
// asked and the partition is idle.
func (p *partition) sleepIfAsked() {
	if p.sleep.asleep.Load() || !p.sleep.asked.Load() || !p.idleForSleep() {
		return
	}
	if ok, wakeAt := p.sleepable(); ok {
		p.closeForSleep(wakeAt)
	}
}

// closeForSleep closes p's logs (its actor parked or not started); its
// timer is set for wakeAt (0: none).
func (p *partition) closeForSleep(wakeAt int64) {
	p.sleep.asked.Store(false)
	p.timer.halt() // armed for a deadline that has gone (a lease settled)
	p.timer.stop, p.timer.at = nil, 0
	p.timer.arm(p.clock, p.clock.Now().UnixNano(), wakeAt, p.box.wk)
	if p.commit.pipelined {
		// The lanes' goroutines hold the logs: stop them; they start
		// again at their first request after the reopen.
		p.lanes.halt()
		p.lanes = syncLanes{stop: make(chan struct{})}
	}
	var errs []error
	if err := p.data.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close data: %w", err))
	}
	if err := p.events.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close events: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		// A close that failed (its fsync) leaves logs whose state is
		// unknown: the reopen recovers them as after a crash, which
		// cannot lose what they confirmed.
		p.t.b.logf("ERROR topic %s partition %d: closing idle logs: %v", p.t.name, p.idx, err)
	}
	p.sleep.mu.Lock()
	p.sleep.asleep.Store(true)
	p.sleep.mu.Unlock()
	p.swaps, p.side.store = swapGuard{}, nil
	p.t.b.logs.closed(p)
}

// idleForSleep reports whether nothing of p needs its logs until its next
// command.
func (p *partition) idleForSleep() bool {
	c := &p.commit
	if p.stopping || !p.cachedStores() || p.evw.snapDone != nil ||
		len(c.pending) > 0 || len(c.collecting) > 0 || len(c.after) > 0 || len(p.evw.sink.b) > 0 ||
		len(c.pubs) > 0 || len(c.sets) > 0 || !p.box.q.empty() || !p.box.ctl.empty() || p.syncFailure() != nil {
		return false
	}
	if c.pipelined && (p.lanes.data.busy || p.lanes.ev.busy) {
		return false
	}
	for _, gp := range p.order {
		if len(gp.waiters) > 0 || len(gp.subs) > 0 {
			return false
		}
	}
	return p.last == p.commit.durData
}

// sleepable reports whether nothing on armTimer's list needs p's logs
// soon: no lease end or nack delay, no retention pass due now, no dead
// letter to retry, no compressed segment to release. wakeAt is when the age
// limit expires its oldest message (0: never), for the timer of the
// partition while its logs are closed; one due within a retention
// interval keeps them open.
func (p *partition) sleepable() (ok bool, wakeAt int64) {
	for _, gp := range p.order {
		if gp.liveDeadline() != 0 {
			return false, 0
		}
	}
	if p.retentionDueNow() || p.dlqRetry || (p.swaps.log != nil && (p.swaps.watch > 0 || p.swaps.log.SwapCount() > p.swaps.released)) {
		return false, 0
	}
	if age := p.t.cfg.MaxAgeMs; age > 0 {
		if at := max(p.first, p.ret.askedCut); at <= p.last {
			rec, err := p.data.Read(at)
			if err != nil {
				return false, 0
			}
			wakeAt = rec.Time + age*1e6
			if wakeAt-p.clock.Now().UnixNano() < int64(p.t.b.opts.RetentionInterval) {
				return false, 0
			}
		}
	}
	return true, wakeAt
}

// liveDeadline drops the timers of settled, redelivered or extended
// offsets from the top of g's heap (expire would skip them) and returns
// the earliest one still in force (0: none).
func (g *groupState) liveDeadline() int64 {
	for {
		e, ok := g.timers.peek()
		if !ok {
			return 0
		}
		if p, ok := g.pending[e.seq]; ok && p.attempts == e.attempt && p.deadline == e.at {
			return e.at
		}
		g.timers.pop()
	}
}

// reopenLogs (actor) opens a sleeping partition's logs again, as Open does
// (with the quick verify: this process wrote what they hold since they
// were checked), without replaying the state it kept.
func (p *partition) reopenLogs() error {
	data, events, err := p.t.openLogs(p.dir, true)
	if err != nil {
		return fmt.Errorf("topic %s partition %d: reopen: %w", p.t.name, p.idx, err)
	}
	if first, last := data.Bounds(); first != p.first || last != p.last {
		data.Close()
		events.Close()
		return fmt.Errorf("topic %s partition %d: %w: the data log reopened holds [%d, %d], the partition had [%d, %d]",
			p.t.name, p.idx, ErrCorruptState, first, last, p.first, p.last)
	}
	p.sleep.mu.Lock()
	p.useLogs(data, events)
	p.sleep.asleep.Store(false)
	p.sleep.err = nil
	p.sleep.mu.Unlock()
	named, err := p.restoreSideEvents()
	if err != nil {
		p.t.b.logf("ERROR topic %s partition %d: side copies after a reopen: %v", p.t.name, p.idx, err)
	}
	_, p.commit.durEvents = events.Bounds()
	p.evw.last = max(p.evw.last, p.commit.durEvents)
	p.side = sideCopies{}
	p.openSideCopies(named)
	for _, q := range p.t.b.logs.opened(p) {
		q.sleep.asked.Store(true)
		q.box.wk.kick()
	}
	return nil
}

// failAsleep answers the commands of a round that could not reopen the
// logs with err, and runs its control closures (their log calls fail with
// ErrClosed).
func (p *partition) failAsleep(err error) {
	if p.sleep.err == nil || p.sleep.err.Error() != err.Error() {
		p.t.b.logf("ERROR %v", err)
	}
	p.sleep.err = err
	p.refuseRound(p.t.b.noteFileErr(err))
}

// refuseRound answers the commands of a round that cannot run with err,
// and runs its control closures (their log calls may fail): a partition
// whose logs could not reopen, or that another node serves (role.go).
func (p *partition) refuseRound(err error) {
	for i, fn := range p.in.ctls {
		fn(p)
		p.in.ctls[i] = nil
	}
	for i := range p.in.cmds {
		c := &p.in.cmds[i]
		switch c.kind {
		case cmdPublish:
			if c.reserved {
				p.t.unreserve(1, int64(len(c.body)))
			}
			p.t.b.bodies.put(c.buf)
			if c.pubDone != nil {
				c.pubDone.PublishDone(Position{}, err)
			}
		case cmdSettle:
			if c.setDone != nil {
				c.setDone(err)
			}
		case cmdPoll:
			if w := c.poll; w.claim() {
				p.commit.after = append(p.commit.after, func() { w.finish(nil, err) })
			}
		}
		p.in.cmds[i] = command{}
	}
	for _, fn := range p.commit.after {
		fn()
	}
	clear(p.commit.after)
	p.commit.after = p.commit.after[:0]
	p.timer.fired.Store(false)
}

// stopAsleep (actor, stopping) ends a sleeping partition: its logs are
// closed already and its state was durable when they closed. It reports
// whether p was asleep.
func (p *partition) stopAsleep() bool {
	if !p.sleep.asleep.Load() {
		p.t.b.logs.closed(p)
		return false
	}
	c := &p.commit
	if len(p.evw.sink.b) > 0 || len(c.sets) > 0 || len(c.pubs) > 0 || len(c.after) > 0 {
		// Control closures ran while the logs could not reopen (failAsleep)
		// and left work: finish it as a running partition would.
		err := p.reopenLogs()
		if err == nil {
			p.round()
			p.t.b.logs.closed(p)
			return false
		}
		for _, r := range c.sets {
			r.done(err)
		}
		for _, r := range c.pubs {
			r.done.PublishDone(Position{}, err)
		}
		for _, fn := range c.after {
			fn()
		}
		c.sets, c.pubs, c.after = nil, nil, nil
	}
	p.timer.halt()
	return true
}

// scrubStores returns p's logs for the scrub, or nothing while they are
// closed.
func (p *partition) scrubStores() []seglog.Store {
	p.sleep.mu.Lock()
	defer p.sleep.mu.Unlock()
	if p.sleep.asleep.Load() {
		return nil
	}
	return []seglog.Store{p.data, p.events}
}
