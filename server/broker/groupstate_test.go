package broker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The model: the state machine of the package doc (doc.go, "State machine") written as plainly as possible.
type mState uint8

const (
	mNew mState = iota
	mReady
	mInflight
	mDelayed
	mDLQ
	mSettled
)

type mOff struct {
	st       mState
	attempts uint32
	deadline int64
}

type model struct {
	offs     []mOff // offs[i] is offset i+1
	now      int64
	lease    int64
	maxDeliv uint32
	backoff  []int64 // delays after delivery 1, 2, ...; the last repeats
	ordered  bool    // one offset out at a time: the lowest unsettled
}

// retry: the delay after a NACK without one or an expiry, by the schedule.
func (m *model) retry(o *mOff) int64 {
	if len(m.backoff) == 0 {
		return 0
	}
	return m.backoff[min(int(o.attempts), len(m.backoff))-1]
}

func (m *model) get(s Seq) *mOff { return &m.offs[s-1] }

// requeue: what nack(0)/expiry/release do to an inflight offset.
func (m *model) requeue(o *mOff, delay int64) {
	switch {
	case m.maxDeliv > 0 && o.attempts >= m.maxDeliv:
		o.st = mDLQ
	case delay > 0:
		o.st, o.deadline = mDelayed, m.now+delay
	default:
		o.st = mReady
	}
}

func (m *model) poll(max int) []Seq {
	var out []Seq
	for len(out) < max {
		pick := Seq(0)
		if m.ordered {
			for i := range m.offs { // the lowest unsettled, if it may go out
				if st := m.offs[i].st; st != mSettled {
					if st == mReady || st == mNew {
						pick = Seq(i + 1)
					}
					break
				}
			}
		}
		for i := range m.offs { // lowest ready redelivery first
			if m.ordered {
				break
			}
			if m.offs[i].st == mReady {
				pick = Seq(i + 1)
				break
			}
		}
		if pick == 0 && !m.ordered {
			for i := range m.offs {
				if m.offs[i].st == mNew {
					pick = Seq(i + 1)
					break
				}
			}
		}
		if pick == 0 {
			break
		}
		o := m.get(pick)
		o.st, o.attempts, o.deadline = mInflight, o.attempts+1, m.now+m.lease
		out = append(out, pick)
	}
	return out
}

func (m *model) settle(s Seq, attempt uint32, op SettleOp) error {
	if s < 1 || int(s) > len(m.offs) || attempt == 0 {
		return ErrUnknownHandle
	}
	o := m.get(s)
	switch {
	case o.st == mSettled:
		if op.Kind == SettleExtend {
			return ErrNotInflight
		}
		return nil
	case o.st == mNew:
		return ErrUnknownHandle
	case attempt < o.attempts:
		return ErrStaleHandle
	case attempt > o.attempts:
		return ErrUnknownHandle
	case o.st == mDLQ:
		if op.Kind == SettleExtend {
			return ErrNotInflight
		}
		return nil
	}
	switch op.Kind {
	case SettleAck:
		o.st = mSettled
	case SettleNack:
		if o.st == mInflight {
			d := int64(op.Delay)
			if d <= 0 {
				d = m.retry(o)
			}
			m.requeue(o, d)
		}
	case SettleReject:
		o.st = mDLQ
	case SettleExtend:
		if o.st != mInflight {
			return ErrNotInflight
		}
		d := int64(op.Delay)
		if d <= 0 {
			d = m.lease
		}
		o.deadline = m.now + d
	}
	return nil
}

func (m *model) advance(d int64) {
	m.now += d
	for i := range m.offs {
		o := &m.offs[i]
		if o.st == mInflight && o.deadline <= m.now {
			m.requeue(o, m.retry(o))
		} else if o.st == mDelayed && o.deadline <= m.now {
			o.st = mReady
		}
	}
}

func (m *model) restart() {
	for i := range m.offs {
		o := &m.offs[i]
		if o.st == mInflight || o.st == mDelayed {
			o.st = mReady
			if m.maxDeliv > 0 && o.attempts >= m.maxDeliv {
				o.st = mDLQ
			}
		}
	}
}

func implState(g *groupState, s Seq) (mState, uint32) {
	if g.acks.contains(s) {
		return mSettled, 0
	}
	p, ok := g.pending[s]
	if !ok {
		if s < g.next {
			return 255, 0 // invariant broken: below next yet neither settled nor pending
		}
		return mNew, 0
	}
	switch p.state {
	case stReady:
		return mReady, p.attempts
	case stInflight:
		return mInflight, p.attempts
	case stDelayed:
		return mDelayed, p.attempts
	}
	return mDLQ, p.attempts
}

// TestGroupStateModel runs random publish/poll/ack/nack/reject/extend/
// expire/release/dead-letter/restart sequences against the model.
func TestGroupStateModel(t *testing.T) {
	kinds := []SettleKind{SettleAck, SettleNack, SettleReject, SettleExtend}
	for seed := uint64(0); seed < 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 42))
		const lease = int64(100)
		maxDeliv := r.IntN(4) // 0 means unlimited here
		md := maxDeliv
		if md == 0 {
			md = -1
		}
		var backoff []int64 // a third of the seeds without a schedule
		for range r.IntN(3) * (1 + r.IntN(3)) {
			backoff = append(backoff, 1+r.Int64N(150))
		}
		ordered := seed%4 == 3 // a quarter of the seeds ordered
		var ev evSink
		g := newGroupState(1, lease, md, 1)
		g.backoffNs = backoff
		g.ordered = ordered
		g.ev = &ev
		var history []byte // every event ever emitted, for the full-replay check
		m := &model{lease: lease, maxDeliv: uint32(maxDeliv), backoff: backoff, ordered: ordered}
		var last Seq
		handles := map[Seq][]uint32{} // every attempt ever handed out
		var trace []string
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d after %v: %s", seed, trace, fmt.Sprintf(format, args...))
		}
		for step := 0; step < 150; step++ {
			switch op := r.IntN(20); {
			case op < 4:
				last++
				m.offs = append(m.offs, mOff{})
				trace = append(trace, "pub")
			case op < 8:
				n := 1 + r.IntN(3)
				want := m.poll(n)
				var got []Seq
				for len(got) < n {
					s, ok := g.take(last)
					if !ok {
						break
					}
					a := g.deliver(s, m.now, 1, 0, nil)
					handles[s] = append(handles[s], a)
					got = append(got, s)
				}
				trace = append(trace, fmt.Sprint("poll", n, got))
				if fmt.Sprint(got) != fmt.Sprint(want) {
					fail("poll got %v, model %v", got, want)
				}
			case op < 15 && last > 0:
				s := Seq(1 + r.IntN(int(last)))
				var a uint32 = 1
				if hs := handles[s]; len(hs) > 0 {
					a = hs[r.IntN(len(hs))]
				}
				if r.IntN(20) == 0 {
					a = 0
				}
				sop := SettleOp{Kind: kinds[r.IntN(len(kinds))], Delay: time.Duration(r.IntN(3) * 50)}
				want := m.settle(s, a, sop)
				got := g.settle(s, a, sop, m.now)
				trace = append(trace, fmt.Sprintf("settle(%d,%d,%d,%d)", s, a, sop.Kind, sop.Delay))
				if !errors.Is(got, want) && !(got == nil && want == nil) {
					fail("settle got %v, model %v", got, want)
				}
			case op < 17:
				d := int64(r.IntN(120))
				m.advance(d)
				g.expire(m.now)
				trace = append(trace, fmt.Sprint("advance", d))
			case op < 18 && r.IntN(3) == 0:
				// rebuild the lazily cleaned structures
				g.rebuildTimers()
				g.rebuildReady()
				g.rebuildPending()
				trace = append(trace, "compact")
			case op < 18:
				// release owner 1: everything inflight goes back
				for i := range m.offs {
					if m.offs[i].st == mInflight {
						m.requeue(&m.offs[i], 0)
					}
				}
				g.release(1, m.now)
				trace = append(trace, "release")
			case op < 19:
				// dead-letter copies complete
				for i := range m.offs {
					if m.offs[i].st == mDLQ {
						m.offs[i].st = mSettled
					}
				}
				for _, d := range g.dlq {
					g.deadLettered(d.seq)
				}
				g.dlq = nil
				trace = append(trace, "dlq-done")
			default:
				// restart: from a snapshot of the current state, and
				// independently from the full event history
				history = append(history, ev.b...)
				ev.b = nil
				m.restart()
				_, sgs, err := decodeSnapshot(encodeSnapshot(0, []*groupState{g}))
				if err != nil {
					fail("snapshot: %v", err)
				}
				g2 := g.fresh(sgs[0].frontier) // the rules carried as recoverState carries them
				g2.next, g2.pending = sgs[0].next, sgs[0].pending
				g2.acks.setSpans(sgs[0].spans)
				g2.restored(0)
				g3 := g.fresh(1)
				if err := decodeEvents(history, func(e event) { g3.apply(e.kind, e.seq, e.arg) }); err != nil {
					fail("events: %v", err)
				}
				g3.restored(0)
				for s := Seq(1); s <= last; s++ {
					s2, a2 := implState(g2, s)
					s3, a3 := implState(g3, s)
					if s2 != s3 || a2 != a3 {
						fail("offset %d: snapshot restore %d/%d, event replay %d/%d", s, s2, a2, s3, a3)
					}
				}
				g = g2
				g.ev = &ev
				trace = append(trace, "restart")
			}
			history = append(history, ev.b...)
			ev.b = ev.b[:0]
			for s := Seq(1); s <= last; s++ {
				st, a := implState(g, s)
				o := m.get(s)
				if st != o.st || (st != mSettled && a != o.attempts) {
					fail("offset %d: impl %d attempts %d, model %d attempts %d", s, st, a, o.st, o.attempts)
				}
			}
			inflight := 0
			for _, o := range m.offs {
				if o.st == mInflight {
					inflight++
				}
			}
			if g.nInflight != inflight {
				fail("nInflight %d, model %d", g.nInflight, inflight)
			}
		}
	}
}

// TestGroupStateBoundedMemory: acked deliveries with long leases do not
// leave their lease timers behind without bound.
func TestGroupStateBoundedMemory(t *testing.T) {
	g := newGroupState(1, int64(time.Hour), 5, 1)
	for s := Seq(1); s <= 100000; s++ {
		got, ok := g.take(s)
		if !ok || got != s {
			t.Fatalf("take = %d %v", got, ok)
		}
		g.deliver(s, 0, 0, 0, nil)
		if err := g.settle(s, 1, Ack(), 0); err != nil {
			t.Fatal(err)
		}
		g.compact()
	}
	if len(g.timers) > 5000 || len(g.pending) != 0 || len(g.acks.spans) != 0 || g.acks.frontier != 100001 {
		t.Fatalf("timers %d pending %d spans %d frontier %d", len(g.timers), len(g.pending), len(g.acks.spans), g.acks.frontier)
	}
	// a compacted heap still expires what is live, in order
	for s := Seq(100001); s <= 100010; s++ {
		g.take(s)
		g.deliver(s, int64(s), 0, 0, nil)
	}
	g.compact()
	g.expire(int64(time.Hour) + 100005)
	if g.nInflight != 5 {
		t.Fatalf("inflight after partial expiry %d, want 5", g.nInflight)
	}
}

func TestHeapInit(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	var h timerHeap
	var s seqHeap
	for range 1000 {
		h = append(h, timerEntry{at: int64(r.IntN(500))})
		s = append(s, Seq(r.IntN(500)))
	}
	h.init()
	s.init()
	var prevT int64 = -1
	var prevS Seq
	for len(h) > 0 {
		e := h.pop()
		if e.at < prevT {
			t.Fatal("timer heap out of order")
		}
		prevT = e.at
		x := s.pop()
		if x < prevS {
			t.Fatal("seq heap out of order")
		}
		prevS = x
	}
}

// TestCountersRecountedFromEvents: replaying a group's events gives the
// counters the live transitions kept (they used to start at zero on every
// Open, so after a restart the dashboard showed 0 dead-lettered while the
// dead-letter topic held 3).
func TestCountersRecountedFromEvents(t *testing.T) {
	var ev evSink
	g := newGroupState(1, 1000, 2, 1)
	g.ev = &ev
	for s := Seq(1); s <= 6; s++ {
		g.deliver(s, 0, 1, 0, nil)
	}
	mustSettle := func(seq Seq, attempt uint32, op SettleOp, now int64) {
		t.Helper()
		if err := g.settle(seq, attempt, op, now); err != nil {
			t.Fatalf("settle %d/%d: %v", seq, attempt, err)
		}
	}
	mustSettle(1, 1, Ack(), 0)
	mustSettle(2, 1, Reject(), 0)
	mustSettle(3, 1, Nack(0), 0)
	g.expire(5000) // 4, 5, 6: leases ran out
	for _, seq := range []Seq{3, 4} {
		if s, ok := g.take(6); !ok {
			t.Fatalf("nothing to take for %d", seq)
		} else {
			g.deliver(s, 6000, 1, 0, nil)
		}
	}
	g.expire(20000) // the two redeliveries ran out at their last attempt
	for _, dl := range g.dlq {
		g.deadLettered(dl.seq)
	}
	if g.cnt.Redelivered == 0 || g.cnt.DeadLettered == 0 || g.cnt.Expired == 0 || g.cnt.Rejected == 0 || g.cnt.Nacked == 0 || g.cnt.Acked == 0 {
		t.Fatalf("the script left a counter at zero: %+v", g.cnt)
	}
	r := newGroupState(1, 1000, 2, 1)
	if err := decodeEvents(ev.b, func(e event) { r.apply(e.kind, e.seq, e.arg) }); err != nil {
		t.Fatal(err)
	}
	if r.cnt != g.cnt {
		t.Fatalf("replayed counters %+v, live %+v", r.cnt, g.cnt)
	}
}
