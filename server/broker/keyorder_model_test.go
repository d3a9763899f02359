package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/crashfs"
	"github.com/fibrilmq/fibril/server/seglog"
	"github.com/fibrilmq/fibril/wire"
)

// TestRandomPowerCutsKeepKeyOrder drives a group ordered by key with
// random keyed and keyless publishes (some held back by Fibril-Delay,
// some with a Nats-TTL, and in half of the runs some to a subject the
// group's filter leaves out), polls by several owners, acks, rejects,
// nacks, owner releases, clock steps past leases and power cuts.
// Whatever the interleaving, no delivery of a key comes while another
// delivery of that key is still leased, every delivery of a key is its
// lowest offset not settled (by an answered ack or reject, the filter or
// its TTL), and at the end every unsettled message is delivered, each key
// in offset order.
func TestRandomPowerCutsKeepKeyOrder(t *testing.T) {
	const seeds, steps, leaseMs = 12, 150, 1000
	for seed := uint64(0); seed < seeds; seed++ {
		durSync := seed%3 == 1
		t.Run(fmt.Sprintf("%d,sync%v", seed, durSync), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 29))
			clk := newFakeClock()
			c := &powerCutEnv{testEnv: &testEnv{t: t, dir: t.TempDir(), clock: clk, durSync: durSync},
				dataFS: crashfs.New(seglog.OSFS()), evFS: crashfs.New(seglog.OSFS())}
			c.start()
			t.Cleanup(func() {
				if c.b != nil {
					c.b.Close()
				}
			})
			tp := c.topic("q", TopicConfig{Subjects: []string{"q.>"}, AllowMsgDelay: true, AllowMsgTTL: true})
			gcfg := GroupConfig{Ordered: wire.OrderKey, LeaseMs: leaseMs, MaxDeliveries: -1, DeadLetter: "-"}
			filtered := seed%2 == 1
			if filtered {
				gcfg.Filter = []string{"q.in"}
			}
			g := c.group(tp, "bykey", gcfg)
			type held struct {
				d     Delivery
				owner OwnerID
				until time.Time
			}
			var (
				keyOf   = map[Seq]string{}    // confirmed offsets and their keys
				settled = map[Seq]bool{}      // answered acks and rejects, filtered out
				dies    = map[Seq]time.Time{} // TTL deadlines
				hold    []held
				trace   []string
			)
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("after ...%v: %s", trace[max(len(trace)-40, 0):], fmt.Sprintf(format, args...))
			}
			// gone: settled, or past its TTL (the group settles it when its
			// head reaches it; a delivery before that may still be out).
			gone := func(s Seq, now time.Time) bool {
				d, ok := dies[s]
				return settled[s] || ok && !now.Before(d)
			}
			check := func(ds []Delivery, owner OwnerID) {
				now := clk.Now()
				for _, d := range ds {
					s := d.Handle.Seq
					k, ok := keyOf[s]
					switch {
					case !ok:
						fail("delivered %d, never confirmed", s)
					case settled[s]:
						fail("delivered %d, settled already", s)
					case gone(s, now):
						fail("delivered %d past its TTL", s)
					}
					for _, h := range hold {
						if h.until.After(now) && h.d.Handle.Seq == s {
							fail("delivered %d while its delivery %d is leased", s, h.d.Attempt)
						}
						if k != "" && h.until.After(now) && keyOf[h.d.Handle.Seq] == k {
							fail("delivered %d of key %s while %d of that key is leased", s, k, h.d.Handle.Seq)
						}
					}
					if k != "" {
						for q, kq := range keyOf {
							if kq == k && q < s && !gone(q, now) {
								fail("delivered %d of key %s before %d of that key is settled", s, k, q)
							}
						}
					}
					hold = append(hold, held{d, owner, now.Add(leaseMs * time.Millisecond)})
				}
			}
			cut := func() {
				c.powerCut()
				tp, _ = c.b.Topic("q")
				g, _ = tp.FindGroup("bykey")
				hold = nil
			}
			ops := []SettleOp{Ack(), Ack(), Ack(), Reject(), Nack(0)}
			for step := range steps {
				switch op := r.IntN(40); {
				case op < 12:
					k := []string{"a", "b", "c", ""}[r.IntN(4)]
					subj := "q.in"
					if filtered && r.IntN(4) == 0 {
						subj = "q.out"
					}
					var kv []string
					if k != "" {
						kv = append(kv, wire.HeaderKey, k)
					}
					delayed, ttl := r.IntN(6) == 0, 0
					if delayed {
						kv = append(kv, wire.HeaderDelay, fmt.Sprint(1+r.IntN(3), "s"))
					}
					if r.IntN(6) == 0 {
						ttl = 1 + r.IntN(3)
						kv = append(kv, wire.HeaderTTL, fmt.Sprint(ttl, "s"))
					}
					m := Message{Subject: subj, Data: fmt.Appendf(nil, "%d", step)}
					if len(kv) > 0 {
						m.Header = wire.AppendHeader(nil, kv...)
					}
					pos, err := tp.Publish(context.Background(), m)
					if err != nil {
						fail("publish: %v", err)
					}
					keyOf[pos.Seq] = k
					if subj == "q.out" {
						settled[pos.Seq] = true
					}
					if ttl > 0 {
						dies[pos.Seq] = clk.Now().Add(time.Duration(ttl) * time.Second)
					}
					trace = append(trace, fmt.Sprintf("pub%d(%s,%s,delayed=%v,ttl=%d)", pos.Seq, k, subj, delayed, ttl))
				case op < 22:
					owner := OwnerID(1 + r.IntN(3))
					ds := c.pollNow(g, 1+r.IntN(5), owner)
					check(ds, owner)
					var got []Seq
					for _, d := range ds {
						got = append(got, d.Handle.Seq)
					}
					trace = append(trace, fmt.Sprintf("poll%d%v", owner, got))
				case op < 33 && len(hold) > 0:
					i := r.IntN(len(hold))
					h := hold[i]
					hold = slices.Delete(hold, i, i+1)
					op := ops[r.IntN(len(ops))]
					err := c.settle(h.d, op)
					trace = append(trace, fmt.Sprintf("settle(%d,%d)=%v", h.d.Handle.Seq, op.Kind, err))
					switch {
					case err == nil && op.Kind != SettleNack:
						settled[h.d.Handle.Seq] = true
					case err == nil:
					case !clk.Now().Before(h.until) && (errors.Is(err, ErrStaleHandle) || errors.Is(err, ErrNotInflight)):
					default:
						fail("settle %d: %v", h.d.Handle.Seq, err)
					}
				case op < 35:
					owner := OwnerID(1 + r.IntN(3))
					c.b.ReleaseOwner(owner)
					hold = slices.DeleteFunc(hold, func(h held) bool { return h.owner == owner })
					trace = append(trace, fmt.Sprint("release", owner))
				case op < 38:
					d := time.Duration(r.IntN(2*leaseMs)) * time.Millisecond
					clk.Advance(d)
					trace = append(trace, fmt.Sprint("advance", d))
				default:
					cut()
					trace = append(trace, "powercut")
				}
			}
			cut()
			trace = append(trace, "lastcut")
			clk.Advance(10 * time.Second) // every delay is due
			// Drain: ack everything handed out; each key's next follows.
			unsettled := func() (n int) {
				for s := range keyOf {
					if !gone(s, clk.Now()) {
						n++
					}
				}
				return n
			}
			waitFor(t, "every unsettled message, each key in order", func() bool {
				ds := c.pollNow(g, 50, 9)
				var got []Seq
				for _, d := range ds {
					got = append(got, d.Handle.Seq)
				}
				trace = append(trace, fmt.Sprint("drain", got))
				check(ds, 9)
				for _, d := range ds {
					if err := c.settle(d, Ack()); err != nil {
						fail("drain ack %d: %v", d.Handle.Seq, err)
					}
					settled[d.Handle.Seq] = true
				}
				hold = nil
				return unsettled() == 0
			})
		})
	}
}
