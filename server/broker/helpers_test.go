package broker

import (
	"context"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/memstore"
)

type testEnv struct {
	t      *testing.T
	dir    string
	stores *memstore.Stores
	clock  Clock
	b      *Broker
	// durSync: topics that topic creates without a durability get
	// durability sync (the actor fsyncs each round, syncRound) instead of
	// the default group (the fsync lanes).
	durSync bool
}

// newEnv opens a broker in a temp dir on the real file log (small
// segments). clock may be nil.
func newEnv(t *testing.T, clock Clock) *testEnv {
	t.Helper()
	e := &testEnv{t: t, dir: t.TempDir(), clock: clock}
	e.open()
	t.Cleanup(func() {
		if e.b != nil {
			e.b.Close()
		}
	})
	return e
}

// newEnvWith opens a broker in a temp dir with the test options changed by
// mutate (a queue size, a store opener), closed at cleanup.
func newEnvWith(t *testing.T, mutate func(*Options)) *testEnv {
	t.Helper()
	e := &testEnv{t: t, dir: t.TempDir()}
	o := e.opts()
	mutate(&o)
	b, err := Open(e.dir, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	e.b = b
	t.Cleanup(func() { b.Close() })
	return e
}

// newMemEnv opens a broker on test stores, which crashCopy can copy.
func newMemEnv(t *testing.T, clock Clock) *testEnv {
	t.Helper()
	e := &testEnv{t: t, dir: t.TempDir(), stores: memstore.New(), clock: clock}
	e.open()
	t.Cleanup(func() {
		if e.b != nil {
			e.b.Close()
		}
	})
	return e
}

func (e *testEnv) opts() Options {
	o := Options{Clock: e.clock, Logf: e.t.Logf, RetentionInterval: time.Millisecond,
		SegmentSize: 64 << 10, EventSegmentSize: 64 << 10}
	if e.stores != nil {
		o.OpenStore = e.stores.Open
	}
	return o
}

func (e *testEnv) open() {
	e.t.Helper()
	b, err := Open(e.dir, e.opts())
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	e.b = b
}

func (e *testEnv) restart() {
	e.t.Helper()
	if err := e.b.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	e.b = nil
	e.open()
}

func (e *testEnv) topic(name TopicName, cfg TopicConfig) *Topic {
	e.t.Helper()
	if t, ok := e.b.Topic(name); ok {
		return t
	}
	if e.durSync && cfg.Durability == "" {
		cfg.Durability = DurabilitySync
	}
	t, err := e.b.CreateTopic(name, cfg)
	if err != nil {
		e.t.Fatalf("CreateTopic %s: %v", name, err)
	}
	return t
}

func (e *testEnv) group(t *Topic, name GroupName, cfg GroupConfig) *Group {
	e.t.Helper()
	g, err := t.Group(name, cfg)
	if err != nil {
		e.t.Fatalf("Group %s: %v", name, err)
	}
	return g
}

func (e *testEnv) publish(t *Topic, data string) Position {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pos, err := t.Publish(ctx, Message{Subject: string(t.Name()), Data: []byte(data)})
	if err != nil {
		e.t.Fatalf("Publish: %v", err)
	}
	return pos
}

// poll waits up to 5s for at least one delivery.
func (e *testEnv) poll(g *Group, max int) []Delivery {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ds, err := g.Poll(ctx, max)
	if err != nil {
		e.t.Fatalf("Poll: %v", err)
	}
	return ds
}

// pollNow answers at once, possibly with nothing.
func (e *testEnv) pollNow(g *Group, max int, owner OwnerID) []Delivery {
	e.t.Helper()
	return e.pollNowBytes(g, max, 0, owner)
}

// pollNowBytes is pollNow with a byte limit (PollAsyncBytes; 0: none).
func (e *testEnv) pollNowBytes(g *Group, max int, maxBytes int64, owner OwnerID) []Delivery {
	e.t.Helper()
	ch := make(chan []Delivery, 1)
	err := g.PollAsyncBytes(max, maxBytes, 0, owner, func(ds []Delivery, err error) {
		if err != nil {
			e.t.Errorf("PollAsync: %v", err)
		}
		out := make([]Delivery, len(ds))
		for i := range ds {
			out[i] = ds[i].clone()
		}
		ch <- out
	})
	if err != nil {
		e.t.Fatalf("PollAsync: %v", err)
	}
	select {
	case ds := <-ch:
		return ds
	case <-time.After(5 * time.Second):
		e.t.Fatal("PollAsync: no answer")
		return nil
	}
}

func (e *testEnv) settle(d Delivery, op SettleOp) error {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return e.b.settleWait(ctx, d.Handle, op)
}

// waitFor polls cond until it holds or 5s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitForUpTo(t, 5*time.Second, what, cond)
}

// waitForUpTo is waitFor bounded by d, for background work (compression,
// file removal) that a loaded machine can delay past 5 s.
func waitForUpTo(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func datas(ds []Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d.Data)
	}
	return out
}
