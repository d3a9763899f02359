package broker

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"github.com/fibrilmq/fibril/internal/crashfs"
	"github.com/fibrilmq/fibril/server/seglog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRandomPowerCutsKeepEveryAnswer drives a broker on crashfs logs with
// random publishes, polls, acks, rejects, nacks, clock steps and power cuts
// (every write never fsynced lost), with side copies on or off, some of
// them refused, durability group or sync, the background event
// fsync on or off and workqueue retention on or off. Whatever the interleaving, every answer holds: a
// confirmed message is never lost, an answered ack or reject is never
// undone (the message never comes back), and no delivery is of a message
// that was not confirmed or is already settled.
func TestRandomPowerCutsKeepEveryAnswer(t *testing.T) {
	const seeds, steps, leaseMs = 24, 200, 1000
	for seed := uint64(0); seed < seeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 13))
		refuse := []int64{0, 0, 3, 5}[seed%4]
		noSide := seed%6 == 5
		durSync := seed%5 == 2 // durability sync: the actor fsyncs each round
		evEvery := []time.Duration{time.Hour, 50 * time.Millisecond}[seed/4%2]
		cfg := TopicConfig{}
		if seed%3 == 1 {
			cfg.Retention = RetentionWorkqueue
		}
		name := fmt.Sprintf("%d,refuse%d,noside%v,sync%v,evsync%v,%s", seed, refuse, noSide, durSync, evEvery, cmp.Or(string(cfg.Retention), "default"))
		t.Run(name, func(t *testing.T) {
			clk := newFakeClock()
			c := &powerCutEnv{testEnv: &testEnv{t: t, dir: t.TempDir(), clock: clk, durSync: durSync}, dataFS: crashfs.New(seglog.OSFS()),
				evFS: crashfs.New(seglog.OSFS()), noSide: noSide, refuseEvery: refuse, evSyncEvery: evEvery}
			c.start()
			t.Cleanup(func() {
				if c.b != nil {
					c.b.Close()
				}
			})
			// With workqueue retention most deliveries are acked, so that
			// whole segments are settled and dropped (with side copies in
			// them that the event log may still need).
			maxPoll, maxBody, ops := 8, 3000, []SettleOp{Ack(), Ack(), Reject(), Nack(0)}
			if cfg.Retention == RetentionWorkqueue {
				maxPoll, maxBody, ops = 32, 12000, []SettleOp{Ack(), Ack(), Ack(), Ack(), Ack(), Ack(), Reject(), Nack(0)}
			}
			gcfg := GroupConfig{LeaseMs: leaseMs, MaxDeliveries: -1, DeadLetter: "-"}
			tp := c.topic("q", cfg)
			g := c.group(tp, "w", gcfg)
			type held struct {
				d     Delivery
				until time.Time // the lease's end by the model's clock
			}
			var (
				confirmed = map[string]bool{} // id -> settled (acked or rejected, answered)
				hold      []held
				trace     []string
				next      int
				cuts      int
			)
			fail := func(format string, args ...any) {
				t.Helper()
				if len(trace) > 30 {
					trace = trace[len(trace)-30:]
				}
				t.Fatalf("after ...%v: %s", trace, fmt.Sprintf(format, args...))
			}
			checkDelivered := func(ds []Delivery) {
				for _, d := range ds {
					id := msgID(d)
					settled, ok := confirmed[id]
					switch {
					case !ok:
						fail("delivered %s, never published", id)
					case settled:
						fail("delivered %s, settled already", id)
					}
				}
			}
			cut := func() {
				c.powerCut()
				cuts++
				tp, _ = c.b.Topic("q")
				g, _ = tp.FindGroup("w")
				hold = nil
				clk.Advance(2 * leaseMs * time.Millisecond) // every lease of before the cut runs out
			}
			for step := 0; step < steps; step++ {
				switch op := r.IntN(40); {
				case op < 10:
					for n := 1 + r.IntN(4); n > 0; n-- {
						id := fmt.Sprintf("m%d", next)
						next++
						c.publish(tp, id+" "+strings.Repeat("x", r.IntN(maxBody)))
						confirmed[id] = false
					}
					trace = append(trace, "pub")
				case op < 18:
					ds := c.pollNow(g, 1+r.IntN(maxPoll), 1)
					checkDelivered(ds)
					for _, d := range ds {
						hold = append(hold, held{d, clk.Now().Add(leaseMs * time.Millisecond)})
					}
					trace = append(trace, fmt.Sprint("poll", len(ds)))
				case op < 32 && len(hold) > 0:
					i := r.IntN(len(hold))
					h := hold[i]
					hold = slices.Delete(hold, i, i+1)
					op := ops[r.IntN(len(ops))]
					id := msgID(h.d)
					err := c.settle(h.d, op)
					trace = append(trace, fmt.Sprintf("settle(%s,%d)=%v", id, op.Kind, err))
					switch {
					case err == nil && op.Kind != Nack(0).Kind:
						confirmed[id] = true
					case err == nil:
					case !clk.Now().Before(h.until) && (errors.Is(err, ErrStaleHandle) || errors.Is(err, ErrNotInflight)):
						// the lease ran out first: the message is ready again
					default:
						fail("settle %s: %v", id, err)
					}
				case op < 38:
					d := time.Duration(r.IntN(300)) * time.Millisecond
					clk.Advance(d)
					trace = append(trace, fmt.Sprint("advance", d))
				default:
					cut()
					trace = append(trace, "powercut")
				}
			}
			cut()
			var got []string
			for {
				ds := c.pollNow(g, 50, 2)
				if len(ds) == 0 {
					break
				}
				checkDelivered(ds)
				for _, d := range ds {
					got = append(got, msgID(d))
				}
			}
			var want []string
			for id, settled := range confirmed {
				if !settled {
					want = append(want, id)
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				fail("after the last power cut delivered %d messages %v, want the %d unsettled ones %v", len(got), got, len(want), want)
			}
			t.Logf("%d messages, %d unsettled at the end, %d power cuts, %d side copies refused, first retained %d",
				next, len(want), cuts, c.refused.Load(), tp.Info().Partitions[0].FirstSeq)
		})
	}
}

// msgID is the id a TestRandomPowerCutsKeepEveryAnswer message starts with.
func msgID(d Delivery) string {
	return string(d.Data[:bytes.IndexByte(d.Data, ' ')])
}
