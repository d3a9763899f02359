package broker

import (
	"sync/atomic"
	"time"
)

// pollWaiter is one poll, shared by every partition of the topic: the first
// partition that has messages (or the timeout, or a cancel) claims it, and
// only the claimer calls done.
type pollWaiter struct {
	claimed   atomic.Bool
	group     GroupID
	max       int
	maxBytes  int64 // 0: no byte limit (PollAsyncBytes)
	owner     OwnerID
	holder    Principal    // the owner's principal when the poll started
	wait      bool         // false: answer at once, even with nothing
	declined  atomic.Int32 // partitions that had nothing (for !wait)
	elsewhere atomic.Int32 // partitions another node serves (role.go)
	parts     int32
	stop      func() bool // cancels the timeout, if any
	done      func([]Delivery, error)

	// Set by the claimer, then handed from partition to partition (each
	// hand-off goes through the next actor's control stack): deliveries
	// gathered so far (copies on a tour, borrowed while collecting), how
	// many partitions remain to visit, and the holds on the answer (see
	// release).
	acc         []Delivery
	bytes       int64 // subject+header+payload bytes gathered so far
	hops        int
	next        Partition
	relGen      uint64                // Broker.relGen when the poll started
	outstanding atomic.Int32          // the tour plus commits not yet durable
	failed      atomic.Pointer[error] // a commit of the tour failed its data fsync
	// lowBorrowed: the lowest offset a collecting poll holds; its
	// deliveries borrow their records (not copied) until the completions
	// of the batch it is answered with, so retention keeps them (0: none).
	lowBorrowed Seq
	swap        uint64 // the data log's SwapCount when the poll began to borrow (compressed topics)
}

func (w *pollWaiter) claim() bool { return w.claimed.CompareAndSwap(false, true) }

// bytesFull reports whether the answer reached its byte limit (only the
// partition holding the tour reads or adds to bytes).
func (w *pollWaiter) bytesFull() bool { return w.maxBytes > 0 && w.bytes >= w.maxBytes }

func (w *pollWaiter) finish(ds []Delivery, err error) {
	if w.stop != nil {
		w.stop()
	}
	w.done(ds, err)
}

// decline records that one partition had nothing; the last decline of a
// non-waiting poll answers it with nothing.
func (w *pollWaiter) decline(p *partition) {
	if !w.wait && w.declined.Add(1) == w.parts && w.claim() {
		p.commit.onCommit(func() { w.finish(nil, nil) })
	}
}

// addPoll serves a poll from this partition now or parks it.
func (p *partition) addPoll(w *pollWaiter) {
	if w.claimed.Load() {
		return
	}
	gp := p.groups[w.group]
	if gp == nil {
		w.decline(p)
		return
	}
	if !p.deliverable(gp) || len(gp.waiters) > 0 || gp.g.paused.Load() {
		if w.wait {
			gp.waiters = append(gp.waiters, w)
		} else {
			w.decline(p)
		}
		return
	}
	if w.claim() {
		p.claimed(w)
		p.serve(gp, w)
	}
}

// claimed (actor) starts the tour of a poll this partition claimed: after
// serving it here, the other partitions are asked in turn.
func (p *partition) claimed(w *pollWaiter) {
	w.hops = len(p.t.parts) - 1
	w.next = (p.idx + 1) % Partition(len(p.t.parts))
	w.outstanding.Store(1) // the tour itself
}

// serve delivers to a claimed waiter what this partition has, up to what
// it still wants. When it wants more and partitions remain, the deliveries
// are copied and the waiter moves on at once; this partition's commit is
// awaited in parallel (outstanding). Otherwise this is the last stop: the
// answer goes out once every commit of the tour is durable — borrowing the
// records, without copies, when this partition served it alone.
func (p *partition) serve(gp *groupPart, w *pollWaiter) {
	want := w.max - len(w.acc)
	ds := p.gather(gp, w, want)
	if len(ds) < want && !w.bytesFull() && w.hops > 0 {
		if len(ds) > 0 {
			w.keep(ds)
			w.outstanding.Add(1)
			p.commit.onCommit(p.releaseAfterCommit(w))
		}
		p.handOn(w)
		return
	}
	if len(w.acc) == 0 && w.outstanding.Load() == 1 {
		if p.commit.pipelined && p.lanes.data.busy && len(ds) < want && !w.bytesFull() {
			w.swap = p.swaps.round
			w.borrow(ds)
			p.commit.collecting = append(p.commit.collecting, w)
			return
		}
		// Alone: no other commit is pending and none can start (only
		// the holder of the tour adds to outstanding).
		p.commit.onCommit(p.finishAfterCommit(w, ds))
		return
	}
	w.keep(ds)
	if len(ds) > 0 {
		p.commit.onCommit(p.releaseAfterCommit(w)) // the tour ends with this commit
	} else {
		w.release()
	}
}

// gather leases up to want deliveries of gp to w (fewer once w's answer
// reaches its byte limit), borrowing the records until the round's
// completions have run.
func (p *partition) gather(gp *groupPart, w *pollWaiter, want int) []Delivery {
	ds := make([]Delivery, 0, min(want, gp.readyBound(p.last)))
	for len(ds) < want && !w.bytesFull() {
		d, ok := p.deliverOne(gp, w.owner, w.holder, nil)
		if !ok {
			break
		}
		ds = append(ds, d)
		w.bytes += int64(len(d.Subject) + len(d.Header) + len(d.Data))
	}
	return ds
}

// Collecting polls.
//
// With group commit a poll served while an fsync is in flight cannot be
// answered before the fsync after that one, which starts when the one in
// flight ends and takes every record written meanwhile. So the poll stays
// open (in the commit's collecting, claimed, its deliveries borrowed) and takes what
// arrives until the actor learns that the fsync in flight ended, instead of
// being answered with the few records of the round that served it while
// the records of the next rounds wait for a poll the consumer sends only
// after that answer, and then for one more fsync. It is answered with the
// newest batch pending then: by the next fsync, or by the one after when
// the syncer had already started the next one (it does not wait for the
// actor) before the last of those records were written. A poll that fills
// up is answered with the round that filled it.

// collect gives the collecting polls of gp what is ready now.
func (p *partition) collect(gp *groupPart) {
	k := 0
	for _, w := range p.commit.collecting {
		if w.group == gp.id && !gp.g.paused.Load() &&
			(w.owner == 0 || !p.t.b.ownerReleasedSince(w.owner, w.relGen)) {
			w.borrow(p.gather(gp, w, w.max-len(w.acc)))
			if len(w.acc) >= w.max || w.bytesFull() {
				// answered with this round's batch, which must keep
				// every record the poll borrows
				w.heldBy(&p.commit.minDeliv, &p.swaps.round)
				p.commit.onCommit(p.finishAfterCommit(w, w.acc))
				continue
			}
		}
		p.commit.collecting[k] = w
		k++
	}
	clear(p.commit.collecting[k:])
	p.commit.collecting = p.commit.collecting[:k]
}

// heldBy makes the batch whose minDeliv and swap these are keep what the
// collecting poll w borrows: its records (from retention) and the maps of
// compressed segments they lie in (releaseSwapped).
func (w *pollWaiter) heldBy(minDeliv *Seq, swap *uint64) {
	*minDeliv = lowerSeq(*minDeliv, w.lowBorrowed)
	*swap = min(*swap, w.swap)
}

// closeCollecting ends the collection when the fsync in flight is done:
// each poll is answered with the newest pending batch, which holds the
// events of all its deliveries.
func (p *partition) closeCollecting() {
	for _, w := range p.commit.collecting {
		if n := len(p.commit.pending); n > 0 {
			b := &p.commit.pending[n-1]
			w.heldBy(&b.minDeliv, &b.swap)
			b.after = append(b.after, p.finishAfterCommit(w, w.acc))
		} else {
			w.finish(w.acc, nil) // nothing pending: all of it is durable
		}
	}
	clear(p.commit.collecting)
	p.commit.collecting = p.commit.collecting[:0]
}

// finishAfterCommit answers w with ds among a batch's completions, or fails
// it when the batch's data fsync failed (never hand out what is not durable).
func (p *partition) finishAfterCommit(w *pollWaiter, ds []Delivery) func() {
	return func() {
		if err := p.commit.dataErr; err != nil {
			w.finish(nil, err)
			return
		}
		w.finish(ds, nil)
	}
}

// releaseAfterCommit is w.release run among a batch's completions: when
// the batch's data fsync failed, the poll fails instead of handing out
// records that are not durable.
func (p *partition) releaseAfterCommit(w *pollWaiter) func() {
	return func() {
		if err := p.commit.dataErr; err != nil {
			w.fail(err)
		}
		w.release()
	}
}

// keep copies deliveries into the waiter's answer (the records are
// borrowed only until the round's completions): for a poll on a tour,
// whose answer is given on another partition's actor.
func (w *pollWaiter) keep(ds []Delivery) {
	for _, d := range ds {
		w.acc = append(w.acc, d.clone())
	}
}

// borrow adds deliveries to a collecting poll's answer without copying
// their bytes: the poll is answered on this actor, among the completions
// of a batch whose minDeliv is lowered to w.lowBorrowed, and retention
// keeps those records while the poll collects (retain). Copying them was
// most of the bytes the server allocated at 1 KiB messages.
func (w *pollWaiter) borrow(ds []Delivery) {
	for i := range ds {
		w.lowBorrowed = lowerSeq(w.lowBorrowed, ds[i].Handle.Seq)
	}
	if w.acc == nil {
		w.acc = ds
		return
	}
	w.acc = append(w.acc, ds...)
}

// lowerSeq returns the lower of a and b, where 0 means none.
func lowerSeq(a, b Seq) Seq {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// release drops one hold on the answer (the tour, or one partition's
// commit); the last one answers. The atomic orders the tour's appends to
// acc before the answer, whichever goroutine gives it.
func (w *pollWaiter) release() {
	if w.outstanding.Add(-1) == 0 {
		if e := w.failed.Load(); e != nil {
			w.finish(nil, *e)
			return
		}
		w.finish(w.acc, nil)
	}
}

// fail makes the answer an error (the first one given wins).
func (w *pollWaiter) fail(err error) { w.failed.CompareAndSwap(nil, &err) }

// handOn passes the waiter to the next partition; when that partition is
// closing, the tour ends here.
func (p *partition) handOn(w *pollWaiter) {
	w.hops--
	np := p.t.parts[w.next]
	w.next = (w.next + 1) % Partition(len(p.t.parts))
	if err := np.controlChecked(func(np *partition) { np.continuePoll(w) }); err != nil {
		w.release()
	}
}

// continuePoll (actor) serves a poll another partition claimed and handed
// on; with nothing here it is handed on at once.
func (p *partition) continuePoll(w *pollWaiter) {
	if w.owner != 0 && p.t.b.ownerReleasedSince(w.owner, w.relGen) {
		w.release() // its connection is gone: lease nothing more to it
		return
	}
	gp := p.groups[w.group]
	if gp != nil && !gp.g.paused.Load() && p.role.serves() {
		if p.deliverable(gp) {
			p.serve(gp, w)
			return
		}
	}
	if w.hops > 0 {
		p.handOn(w)
		return
	}
	w.release()
}

// deliverOne leases the next deliverable message of gp and builds its
// Delivery (borrowing the record until the round's completions have run).
func (p *partition) deliverOne(gp *groupPart, owner OwnerID, holder Principal, sub *Subscription) (Delivery, bool) {
	for {
		if !p.deliverable(gp) {
			return Delivery{}, false
		}
		seq, _ := gp.take(p.last)
		rec, err := p.data.Read(seq)
		if err == nil {
			var hdrLen int
			var subject string
			hdrLen, subject, err = decodeMetaReuse(rec.Meta, p.lastSubject)
			if err == nil && hdrLen <= len(rec.Data) {
				p.lastSubject = subject
				attempt := gp.deliver(seq, p.now, owner, holder, sub)
				p.commit.delivered(seq)
				d := Delivery{
					Handle:  Handle{Topic: p.t.id, Group: gp.id, Partition: p.idx, Seq: seq, Attempt: attempt},
					Subject: subject,
					Data:    rec.Data[hdrLen:],
					CRC:     rec.CRC,
					Attempt: attempt,
					Time:    time.Unix(0, rec.Time),
					b:       p.t.b,
				}
				if hdrLen > 0 {
					d.Header = rec.Data[:hdrLen]
				}
				return d, true
			}
		}
		if seq < p.first {
			// Retention removed the record: it can never be delivered,
			// so it is settled for this group rather than retried.
			gp.drop(seq)
			continue
		}
		if p.dropHole(gp, seq) {
			continue // lost to damage, as a repair recorded
		}
		// The record is damaged. It is never settled in the group's
		// name: the group stops here, in this partition, and waits for
		// an operator (restore the file, or fibril repair).
		p.stopAtDamage(gp, seq, err)
		return Delivery{}, false
	}
}

// dispatch hands ready messages to parked polls, then to push
// subscriptions with credit, round robin.
func (p *partition) dispatch() {
	for _, gp := range p.order {
		p.deliverable(gp) // settle the filtered records at its head, even with no consumer: retention must not keep them for it
		if gp.g.paused.Load() {
			continue // Resume wakes the actor
		}
		if len(gp.waiters) > 64 {
			// Polls claimed by another partition (or their timeout) are
			// dropped lazily; compact so they cannot pile up behind a
			// long waiter.
			k := 0
			for _, w := range gp.waiters {
				if !w.claimed.Load() {
					gp.waiters[k] = w
					k++
				}
			}
			clear(gp.waiters[k:])
			gp.waiters = gp.waiters[:k]
		}
		if len(p.commit.collecting) > 0 {
			p.collect(gp)
		}
		for len(gp.waiters) > 0 {
			w := gp.waiters[0]
			if w.claimed.Load() {
				gp.waiters = gp.waiters[1:]
				continue
			}
			if !p.deliverable(gp) {
				break
			}
			gp.waiters = gp.waiters[1:]
			if w.claim() {
				p.claimed(w)
				p.serve(gp, w)
			}
		}
		if len(gp.waiters) == 0 {
			gp.waiters = nil
		}
		p.pushToSubs(gp)
	}
}

func (p *partition) pushToSubs(gp *groupPart) {
	for len(gp.subs) > 0 {
		progress := false
		for range len(gp.subs) {
			if !p.deliverable(gp) {
				return
			}
			gp.rr = (gp.rr + 1) % len(gp.subs)
			s := gp.subs[gp.rr]
			if s.closed.Load() || !s.takeCredit() {
				continue
			}
			d, ok := p.deliverOne(gp, s.owner, s.holder, s)
			if !ok {
				s.returnCredit()
				return
			}
			p.commit.onCommit(func() {
				if p.commit.dataErr != nil {
					return // not durable: the lease runs out, the credit comes back then
				}
				s.deliver(d)
			})
			progress = true
		}
		if !progress {
			return
		}
	}
}

// Subscription is a push consumer of a group: the broker calls its deliver
// function (on a partition actor goroutine; it must be quick and must not
// call blocking methods such as Delivery.Ack — use Broker.Settle) while it
// has credit. A delivery's credit returns when it is settled, its lease expires
// or its owner is released.
type Subscription struct {
	g       *Group
	owner   OwnerID
	holder  Principal
	deliver func(Delivery)
	credit  atomic.Int64
	starved atomic.Bool
	closed  atomic.Bool
}

func (s *Subscription) takeCredit() bool {
	for {
		c := s.credit.Load()
		if c <= 0 {
			s.starved.Store(true)
			return false
		}
		if s.credit.CompareAndSwap(c, c-1) {
			return true
		}
	}
}

// returnCredit gives one credit back; if a partition found the subscription
// without credit, every partition of the topic is woken to look again.
func (s *Subscription) returnCredit() {
	s.credit.Add(1)
	if s.starved.Load() && s.starved.CompareAndSwap(true, false) {
		for _, p := range s.g.t.parts {
			p.box.wk.kick()
		}
	}
}

// Close stops deliveries to the subscription. Its unsettled deliveries keep
// their leases (settle them, or let them expire, or ReleaseOwner). It does
// not wait for the partitions: a delivery may still arrive while it returns.
func (s *Subscription) Close() {
	if !s.closed.CompareAndSwap(false, true) {
		return
	}
	for _, p := range s.g.t.parts {
		gid := s.g.id
		p.control(func(p *partition) {
			gp := p.groups[gid]
			if gp == nil {
				return
			}
			for i, x := range gp.subs {
				if x == s {
					gp.subs = append(gp.subs[:i], gp.subs[i+1:]...)
					break
				}
			}
			if gp.rr >= len(gp.subs) {
				gp.rr = 0
			}
			gp.releaseSub(s)
		})
	}
}
