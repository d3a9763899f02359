package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/memstore"
)

// barrier waits until every partition of every topic has finished a round
// that started after the call.
func barrier(t *testing.T, b *Broker) {
	t.Helper()
	for _, tp := range b.Topics() {
		for _, p := range tp.parts {
			ch := make(chan struct{})
			p.control(func(p *partition) { p.commit.onCommit(func() { close(ch) }) })
			select {
			case <-ch:
			case <-time.After(5 * time.Second):
				t.Fatal("barrier: partition did not answer")
			}
		}
	}
}

// dumpState renders every group's view of every offset: S settled, N never
// delivered, or attempts plus R(eady)/I(nflight)/W(aiting delay)/D(ead-
// lettering). With asRestarted it shows what a restart must produce: leases
// and delays gone (ready again), offsets at max deliveries dead-lettered, and
// dead letters of groups without a dead-letter topic dropped (settled).
func dumpState(t *testing.T, b *Broker, asRestarted bool) string {
	t.Helper()
	barrier(t, b)
	var out []string
	for _, tp := range b.Topics() {
		for _, p := range tp.parts {
			ch := make(chan string, 1)
			p.control(func(p *partition) {
				var sb strings.Builder
				fmt.Fprintf(&sb, "%s/%d last=%d\n", tp.name, p.idx, p.last)
				gps := append([]*groupPart(nil), p.order...)
				sort.Slice(gps, func(i, j int) bool { return gps[i].id < gps[j].id })
				for _, gp := range gps {
					fmt.Fprintf(&sb, " g%d:", gp.id)
					for s := Seq(1); s <= p.last; s++ {
						po, ok := gp.pending[s]
						switch {
						case s < p.first || gp.acks.contains(s):
							sb.WriteString(" S")
							continue
						case !ok:
							sb.WriteString(" N")
							continue
						}
						st := po.state
						if asRestarted && st != stDeadLettering {
							st = stReady
							if gp.maxDeliveries > 0 && po.attempts >= uint32(gp.maxDeliveries) {
								st = stDeadLettering
							}
						}
						if asRestarted && st == stDeadLettering && gp.g.cfg.DeadLetter == "-" {
							sb.WriteString(" S")
							continue
						}
						fmt.Fprintf(&sb, " %d%c", po.attempts, "RIWD"[st])
					}
					sb.WriteString("\n")
				}
				ch <- sb.String()
			})
			out = append(out, <-ch)
		}
	}
	return strings.Join(out, "")
}

// crashCopy copies what is on "disk" right now (files and test logs) into a
// new environment, as if the process had died at this instant, and opens
// it. The caller makes sure the broker is between rounds (barrier).
func (e *testEnv) crashCopy() *testEnv {
	e.t.Helper()
	e2 := &testEnv{t: e.t, dir: e.t.TempDir(), clock: e.clock, durSync: e.durSync}
	err := filepath.Walk(e.dir, func(path string, fi os.FileInfo, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			// Renamed or removed while we walk (the snapshot writer's temp
			// file, off the actor): the copy is a crash just after that.
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(e.dir, path)
		dst := filepath.Join(e2.dir, rel)
		if fi.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // as above
		}
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e2.stores = e.stores.CrashCopy(memstore.RenameUnder(e.dir, e2.dir))
	e2.open()
	e.t.Cleanup(func() {
		if e2.b != nil {
			e2.b.Close()
		}
	})
	return e2
}

// TestCrashAndRestartReplay drives random work through the broker and,
// at random points, compares its state with that of a copy opened from what
// was on disk at that instant (crash), and with itself after Close/Open.
func TestCrashAndRestartReplay(t *testing.T) {
	seeds := uint64(12)
	if raceEnabled {
		seeds = 4
	}
	for seed := uint64(0); seed < seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			clk := newFakeClock()
			e := newMemEnv(t, clk)
			if seed%2 == 1 {
				// reopen with durability sync
				e.b.Close()
				e.durSync = true
				e.open()
			}
			e.b.opts.SnapshotEvery = 1 + r.IntN(20)
			tp := e.topic("q", TopicConfig{})
			cfg := GroupConfig{LeaseMs: 100, MaxDeliveries: 1 + r.IntN(4), DeadLetter: "-"}
			e.group(tp, "a", cfg)
			e.group(tp, "b", cfg)
			var held []Delivery
			for step := 0; step < 120; step++ {
				groups := tp.Groups()
				g := groups[r.IntN(len(groups))]
				switch op := r.IntN(13); {
				case op < 3:
					e.publish(tp, fmt.Sprint(step))
				case op < 6:
					held = append(held, e.pollNow(g, 1+r.IntN(3), OwnerID(1+r.IntN(2)))...)
				case op < 9 && len(held) > 0:
					i := r.IntN(len(held))
					ops := []SettleOp{Ack(), Ack(), Nack(0), Nack(50 * time.Millisecond), Reject(), Extend(0)}
					_ = e.settle(held[i], ops[r.IntN(len(ops))]) // stale handles are part of the game
					if r.IntN(2) == 0 {
						held = append(held[:i], held[i+1:]...)
					}
				case op < 10:
					clk.Advance(time.Duration(r.IntN(150)) * time.Millisecond)
				case op < 11:
					e.b.ReleaseOwner(OwnerID(1 + r.IntN(2)))
				case op == 12:
					if err := tp.Purge(context.Background()); err != nil {
						t.Fatalf("step %d: purge: %v", step, err)
					}
				default:
					want := dumpState(t, e.b, true)
					e2 := e.crashCopy()
					if got := dumpState(t, e2.b, false); got != want {
						t.Fatalf("step %d: after crash\n got: %s\nwant: %s", step, got, want)
					}
					e2.b.Close()
					e2.b = nil
					e.restart()
					tp, _ = e.b.Topic("q")
					held = nil
					if got := dumpState(t, e.b, false); got != want {
						t.Fatalf("step %d: after restart\n got: %s\nwant: %s", step, got, want)
					}
				}
			}
		})
	}
}
