package broker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestBrokerAgainstModel drives a whole broker (real file log, fake clock)
// with random publish/poll/ack/nack/reject/extend/expire/restart sequences
// and checks every answer and, after every step, every offset's state
// against the model of groupstate_test.go. Dead letters go nowhere ("-"), so
// the model settles them at once.
func TestBrokerAgainstModel(t *testing.T) {
	for seed := uint64(0); seed < 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 99))
			clk := newFakeClock()
			e := newEnv(t, clk)
			if seed%2 == 1 {
				e.b.Close()
				e.durSync = true
				e.open()
			}
			const leaseMs = 100
			maxDeliv := 1 + r.IntN(3)
			tp := e.topic("q", TopicConfig{})
			g := e.group(tp, "g", GroupConfig{LeaseMs: leaseMs, MaxDeliveries: maxDeliv, DeadLetter: "-"})
			m := &model{lease: leaseMs * 1e6, maxDeliv: uint32(maxDeliv), now: clk.Now().UnixNano()}
			var handles []Handle
			var trace []string
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("after %v: %s", trace, fmt.Sprintf(format, args...))
			}
			settleDLQ := func() {
				for i := range m.offs {
					if m.offs[i].st == mDLQ {
						m.offs[i].st = mSettled
					}
				}
			}
			for step := 0; step < 80; step++ {
				switch op := r.IntN(20); {
				case op < 5:
					e.publish(tp, fmt.Sprint(step))
					m.offs = append(m.offs, mOff{})
					trace = append(trace, "pub")
				case op < 9:
					n := 1 + r.IntN(3)
					want := m.poll(n)
					var got []Seq
					for _, d := range e.pollNow(g, n, 1) {
						got = append(got, d.Handle.Seq)
						handles = append(handles, d.Handle)
					}
					trace = append(trace, fmt.Sprint("poll", n, got))
					if fmt.Sprint(got) != fmt.Sprint(want) {
						fail("poll got %v, model %v", got, want)
					}
				case op < 15 && len(handles) > 0:
					h := handles[r.IntN(len(handles))]
					ops := []SettleOp{Ack(), Nack(0), Nack(50 * time.Millisecond), Reject(), Extend(0), Extend(300 * time.Millisecond)}
					sop := ops[r.IntN(len(ops))]
					want := m.settle(h.Seq, h.Attempt, sop)
					got := e.b.settleWait(t.Context(), h, sop)
					trace = append(trace, fmt.Sprintf("settle(%d,%d,%d,%v)", h.Seq, h.Attempt, sop.Kind, sop.Delay))
					if !errors.Is(got, want) && !(got == nil && want == nil) {
						fail("settle got %v, model %v", got, want)
					}
				case op < 18:
					d := time.Duration(r.IntN(150)) * time.Millisecond
					clk.Advance(d)
					m.advance(int64(d))
					trace = append(trace, fmt.Sprint("advance", d))
				case op < 19:
					e.b.ReleaseOwner(1)
					for i := range m.offs {
						if m.offs[i].st == mInflight {
							m.requeue(&m.offs[i], 0)
						}
					}
					trace = append(trace, "release")
				default:
					e.restart()
					tp, _ = e.b.Topic("q")
					g, _ = tp.FindGroup("g")
					m.restart()
					trace = append(trace, "restart")
				}
				settleDLQ()
				barrier(t, e.b)
				barrier(t, e.b) // a round that expired leases may have queued more work
				ch := make(chan string, 1)
				tp.parts[0].control(func(p *partition) {
					gs := p.groups[g.ID()].groupState
					for s := Seq(1); int(s) <= len(m.offs); s++ {
						st, a := implState(gs, s)
						if s < p.first {
							st, a = mSettled, 0
						}
						o := m.get(s)
						if st != o.st || (st != mSettled && a != o.attempts) {
							ch <- fmt.Sprintf("offset %d: broker %d attempts %d, model %d attempts %d", s, st, a, o.st, o.attempts)
							return
						}
					}
					ch <- ""
				})
				if msg := <-ch; msg != "" {
					fail("%s", msg)
				}
			}
		})
	}
}
