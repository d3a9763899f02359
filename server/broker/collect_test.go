package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/memstore"
	"github.com/fibrilmq/fibril/server/seglog"
)

// syncGate is a test store (a tool, like the fault stores): while armed,
// each Sync blocks until release, which may make it fail. It keeps its own
// durable point (the test stores count every append as durable): like a
// real fsync, a Sync covers what was written when it started.
type syncGate struct {
	seglog.Store
	mu      sync.Mutex
	hold    chan struct{} // nil: Sync passes
	fail    error
	entered chan struct{}
	durable seglog.Seq
}

func (g *syncGate) Durable() seglog.Seq {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.durable
}

func (g *syncGate) arm() {
	g.mu.Lock()
	g.hold, g.entered = make(chan struct{}), make(chan struct{}, 1)
	g.mu.Unlock()
}

func (g *syncGate) Sync() (seglog.Seq, error) {
	g.mu.Lock()
	hold, entered := g.hold, g.entered
	g.mu.Unlock()
	_, upto := g.Store.Bounds()
	if hold != nil {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-hold
		g.mu.Lock()
		err := g.fail
		g.mu.Unlock()
		if err != nil {
			return g.Durable(), err
		}
	}
	d, err := g.Store.Sync()
	if err == nil {
		g.mu.Lock()
		g.durable = max(g.durable, min(d, upto))
		g.mu.Unlock()
	}
	return g.Durable(), err
}

// waitEntered waits until a Sync is held.
func (g *syncGate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("no fsync reached the gate")
	}
}

// step lets the held Sync through and holds the next one.
func (g *syncGate) step() {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.hold
	g.hold = make(chan struct{})
	close(old)
}

// release lets the held Sync (and every later one) through; with err the
// held one and later ones fail.
func (g *syncGate) release(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.hold == nil || g.fail != nil {
		return // not armed, or released already with a failure
	}
	g.fail = err
	close(g.hold)
	if err == nil {
		g.hold = nil // later Syncs pass
	} // else the closed channel stays: later Syncs fail at once
}

// gatedEnv is a broker on test stores whose data logs sit behind a
// syncGate each (by directory).
func gatedEnv(t *testing.T, more ...func(*Options)) (*testEnv, func(tp *Topic) *syncGate) {
	t.Helper()
	e, gateOf := gatedLogsEnv(t, more...)
	return e, func(tp *Topic) *syncGate { return gateOf(tp, dataLogName) }
}

// gatedLogsEnv is a broker on test stores whose logs (data and events)
// sit behind a syncGate each; gateOf gives partition 0's gate of a log.
func gatedLogsEnv(t *testing.T, more ...func(*Options)) (*testEnv, func(tp *Topic, log string) *syncGate) {
	t.Helper()
	stores := memstore.New()
	var mu sync.Mutex
	gates := map[string]*syncGate{}
	e := newEnvWith(t, func(o *Options) {
		for _, m := range more {
			m(o)
		}
		o.OpenStore = func(dir string, policy seglog.Policy) (seglog.Store, error) {
			s, err := stores.Open(dir, policy)
			if err != nil {
				return s, err
			}
			g := &syncGate{Store: s}
			mu.Lock()
			gates[dir] = g
			mu.Unlock()
			return g, nil
		}
	})
	t.Cleanup(func() { // before the broker's Close (cleanups run last first)
		mu.Lock()
		defer mu.Unlock()
		for _, g := range gates {
			g.release(nil)
		}
	})
	return e, func(tp *Topic, log string) *syncGate {
		mu.Lock()
		defer mu.Unlock()
		return gates[filepath.Join(tp.dir, "0", log)]
	}
}

// collectFixture is one single-partition topic "q" with group "w" behind a
// syncGate, and helpers to publish without waiting and to wait for the
// group's in-flight count.
type collectFixture struct {
	t        *testing.T
	e        *testEnv
	tp       *Topic
	g        *Group
	gate     *syncGate
	confirms chan error
}

func newCollectFixture(t *testing.T) *collectFixture {
	t.Helper()
	e, gateOf := gatedEnv(t)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{DeadLetter: "-"})
	return &collectFixture{t: t, e: e, tp: tp, g: g, gate: gateOf(tp), confirms: make(chan error, 16)}
}

// pub publishes s; its confirm (nil or the error) goes to confirms.
func (f *collectFixture) pub(s string) {
	f.t.Helper()
	if err := f.tp.PublishAsync(Message{Subject: "q", Data: []byte(s)}, func(_ Position, err error) { f.confirms <- err }); err != nil {
		f.t.Fatal(err)
	}
}

func (f *collectFixture) inflight(n int64) {
	f.t.Helper()
	waitFor(f.t, fmt.Sprintf("%d in flight", n), func() bool {
		in, err := f.g.InfoCurrent(context.Background())
		return err == nil && in.Inflight == n
	})
}

// holdFirst publishes x with the gate armed and returns once x's fsync is
// in flight and held.
func (f *collectFixture) holdFirst() {
	f.t.Helper()
	f.gate.arm()
	f.pub("x")
	f.gate.waitEntered(f.t)
}

// TestPollCollectsWhileFsyncInFlight: a poll served while a commit's fsync
// is in flight cannot be answered before the next fsync, so it takes the
// records published until that one starts, instead of being answered with
// the first one alone while the others wait for a poll the consumer sends
// only after that answer (and then for one more fsync). A poll that fills
// up takes no more; what is left waits for the next poll.
func TestPollCollectsWhileFsyncInFlight(t *testing.T) {
	for _, tc := range []struct {
		max, want int
	}{
		{10, 3}, // collects x, m1, m2
		{2, 2},  // full after x, m1
	} {
		t.Run(fmt.Sprintf("max=%d", tc.max), func(t *testing.T) {
			f := newCollectFixture(t)
			e, g, gate, confirms, pub, inflight := f.e, f.g, f.gate, f.confirms, f.pub, f.inflight
			f.holdFirst()
			answer := make(chan []Delivery, 1)
			if err := g.PollAsync(tc.max, 5*time.Second, 1, func(ds []Delivery, err error) {
				if err != nil {
					t.Errorf("poll: %v", err)
				}
				answer <- ds
			}); err != nil {
				t.Fatal(err)
			}
			inflight(1) // served with x
			pub("m1")
			inflight(2) // m1 went to the same poll
			pub("m2")
			if tc.max > 2 {
				inflight(3)
			} else {
				time.Sleep(20 * time.Millisecond) // m2 must stay ready: nothing to wait for
				if in := g.Info(); in.Inflight != 2 {
					t.Fatalf("inflight %d after the poll filled up, want 2", in.Inflight)
				}
			}
			select {
			case ds := <-answer:
				t.Fatalf("answered with %d deliveries while the fsync of its records was held", len(ds))
			default:
			}
			gate.release(nil)
			var ds []Delivery
			select {
			case ds = <-answer:
			case <-time.After(5 * time.Second):
				t.Fatal("no answer after the fsync")
			}
			var got []string
			for _, d := range ds {
				got = append(got, string(d.Data))
			}
			if len(got) != tc.want || got[0] != "x" || got[1] != "m1" {
				t.Fatalf("answer %q, want the first %d of [x m1 m2]", got, tc.want)
			}
			for range 3 {
				if err := <-confirms; err != nil {
					t.Fatalf("publish: %v", err)
				}
			}
			if tc.max == 2 {
				if ds := e.pollNow(g, 10, 1); len(ds) != 1 || string(ds[0].Data) != "m2" {
					t.Fatalf("next poll got %d deliveries, want m2", len(ds))
				}
			}
		})
	}
}

// TestCollectingPollFailsWithItsFsync: when the fsync a collecting poll
// waits for fails, the poll gets the error and none of the records (which
// may not be on disk), and no publish is confirmed.
func TestCollectingPollFailsWithItsFsync(t *testing.T) {
	f := newCollectFixture(t)
	g, gate, confirms, pub, inflight := f.g, f.gate, f.confirms, f.pub, f.inflight
	f.holdFirst()
	type result struct {
		ds  []Delivery
		err error
	}
	answer := make(chan result, 1)
	if err := g.PollAsync(10, 5*time.Second, 1, func(ds []Delivery, err error) { answer <- result{ds, err} }); err != nil {
		t.Fatal(err)
	}
	inflight(1)
	pub("m1")
	inflight(2) // collected
	gate.release(errors.New("injected fsync failure"))
	select {
	case r := <-answer:
		if r.err == nil || len(r.ds) != 0 {
			t.Fatalf("answer: %d deliveries, err %v; want the fsync error and nothing", len(r.ds), r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer after the failed fsync")
	}
	for range 2 {
		if err := <-confirms; err == nil {
			t.Fatal("a publish was confirmed although its fsync failed")
		}
	}
}

// TestNextFsyncStartsWhileActorBusy: when an fsync ends and the actor has
// written more meanwhile, the syncer starts the next fsync at once. It used
// to wait until the actor took the result and asked again, so an actor
// busy with a long round (the completions of a slow fsync are one) held up
// the fsync the next confirms wait for.
func TestNextFsyncStartsWhileActorBusy(t *testing.T) {
	f := newCollectFixture(t)
	f.holdFirst() // x's fsync is held
	f.pub("m1")   // written while x's fsync is in flight: needs the next one
	waitFor(t, "m1 written", func() bool { _, last := f.gate.Bounds(); return last == 2 })
	busy, unblock := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release) // the broker's Close needs the actor back
	f.tp.parts[0].control(func(*partition) { close(busy); <-unblock })
	select {
	case <-busy:
	case <-time.After(5 * time.Second):
		t.Fatal("the actor did not run the blocking control")
	}
	f.gate.release(nil)
	waitFor(t, "m1 durable while the actor is busy", func() bool { return f.gate.Durable() == 2 })
	release()
	for range 2 {
		select {
		case err := <-f.confirms:
			if err != nil {
				t.Fatalf("publish: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no confirm")
		}
	}
}

// TestCollectingPollKeepsItsRecordsFromRetention: a collecting poll's
// deliveries borrow their records instead of copying them, so retention
// (here max_msgs 1, checked every round) must not delete those records
// while the poll collects, and may again once its answer is given.
func TestCollectingPollKeepsItsRecordsFromRetention(t *testing.T) {
	e, gateOf := gatedEnv(t, func(o *Options) { o.RetentionInterval = time.Nanosecond })
	tp := e.topic("q", TopicConfig{Retention: RetentionLimits, MaxMsgs: 1})
	g := e.group(tp, "w", GroupConfig{DeadLetter: "-"})
	f := &collectFixture{t: t, e: e, tp: tp, g: g, gate: gateOf(tp), confirms: make(chan error, 16)}
	f.holdFirst()
	answer := make(chan []Delivery, 1)
	if err := g.PollAsync(10, 5*time.Second, 1, func(ds []Delivery, err error) {
		if err != nil {
			t.Errorf("poll: %v", err)
		}
		var got []string
		for _, d := range ds {
			got = append(got, string(d.Data)) // read while borrowed
		}
		answer <- append([]Delivery(nil), ds...)
		if fmt.Sprint(got) != "[x m1 m2]" {
			t.Errorf("answer %q, want [x m1 m2]", got)
		}
	}); err != nil {
		t.Fatal(err)
	}
	f.inflight(1)
	f.pub("m1")
	f.inflight(2)
	f.pub("m2")
	f.inflight(3)
	kept := func(when string) {
		t.Helper()
		for range 3 { // rounds, each with a retention pass
			if _, err := g.InfoCurrent(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if n := tp.Info().Messages; n != 3 {
			t.Fatalf("%s: %d messages kept while a poll borrows 3 of them, want 3", when, n)
		}
	}
	kept("collecting")
	// The fsync of x ends: x's batch completes and the poll stops collecting,
	// to be answered with the batch of m2's round, whose fsync is held next.
	f.gate.step()
	f.gate.waitEntered(t)
	kept("answer pending")
	f.gate.release(nil)
	select {
	case <-answer:
	case <-time.After(5 * time.Second):
		t.Fatal("no answer after the fsync")
	}
	for range 3 {
		if err := <-f.confirms; err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	f.pub("m3") // a round after the answer: retention applies max_msgs again
	if err := <-f.confirms; err != nil {
		t.Fatalf("publish: %v", err)
	}
	waitFor(t, "max_msgs once the poll is answered", func() bool { return tp.Info().Messages == 1 })
}
