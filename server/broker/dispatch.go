package broker

import (
	"sync/atomic"
	"time"
)

// pollWaiter is one poll, shared by every partition of the topic: the first
// partition that has messages (or the timeout, or a cancel) claims it, and
// only the claimer calls done.
type pollWaiter struct {
	claimed  atomic.Bool
	group    GroupID
	max      int
	owner    OwnerID
	wait     bool         // false: answer at once, even with nothing
	declined atomic.Int32 // partitions that had nothing (for !wait)
	parts    int32
	stop     func() bool // cancels the timeout, if any
	done     func([]Delivery, error)
}

func (w *pollWaiter) claim() bool { return w.claimed.CompareAndSwap(false, true) }

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
		p.after = append(p.after, func() { w.finish(nil, nil) })
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
	if _, ok := gp.take(p.durData); !ok || len(gp.waiters) > 0 {
		if w.wait {
			gp.waiters = append(gp.waiters, w)
		} else {
			w.decline(p)
		}
		return
	}
	if w.claim() {
		p.serve(gp, w)
	}
}

// serve delivers up to w.max messages to a claimed waiter.
func (p *partition) serve(gp *groupPart, w *pollWaiter) {
	ds := make([]Delivery, 0, min(w.max, 64))
	for len(ds) < w.max {
		d, ok := p.deliverOne(gp, w.owner, nil)
		if !ok {
			break
		}
		ds = append(ds, d)
	}
	p.after = append(p.after, func() { w.finish(ds, nil) })
}

// deliverOne leases the next deliverable message of gp and builds its
// Delivery (borrowing the record until the round's completions have run).
func (p *partition) deliverOne(gp *groupPart, owner OwnerID, sub *Subscription) (Delivery, bool) {
	for {
		seq, ok := gp.take(p.durData)
		if !ok {
			return Delivery{}, false
		}
		rec, err := p.data.Read(seq)
		if err == nil {
			var hdrLen int
			var subject string
			hdrLen, subject, err = decodeMeta(rec.Meta)
			if err == nil && hdrLen <= len(rec.Data) {
				attempt := gp.deliver(seq, p.now, owner, sub)
				if p.minDeliv == 0 || seq < p.minDeliv {
					p.minDeliv = seq
				}
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
		// The record is gone (retention) or unreadable: it can never be
		// delivered, so it is settled for this group rather than retried
		// forever.
		if seq >= p.first {
			p.t.b.logf("topic %s partition %d: offset %d unreadable, skipped: %v", p.t.name, p.idx, seq, err)
		}
		gp.drop(seq)
	}
}

// dispatch hands ready messages to parked polls, then to push
// subscriptions with credit, round robin.
func (p *partition) dispatch() {
	for _, gp := range p.order {
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
		for len(gp.waiters) > 0 {
			w := gp.waiters[0]
			if w.claimed.Load() {
				gp.waiters = gp.waiters[1:]
				continue
			}
			if _, ok := gp.take(p.durData); !ok {
				break
			}
			gp.waiters = gp.waiters[1:]
			if w.claim() {
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
			if _, ok := gp.take(p.durData); !ok {
				return
			}
			gp.rr = (gp.rr + 1) % len(gp.subs)
			s := gp.subs[gp.rr]
			if s.closed.Load() || !s.takeCredit() {
				continue
			}
			d, ok := p.deliverOne(gp, s.owner, s)
			if !ok {
				s.returnCredit()
				return
			}
			p.after = append(p.after, func() { s.deliver(d) })
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
			p.wk.kick()
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
