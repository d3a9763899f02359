package broker

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestGroupBackoff: with backoff_ms, a NACK without a delay and an expired
// lease make the message ready only after the schedule's delay for its
// delivery count (the last entry repeating); a NACK with a delay keeps its
// own, and the schedule survives a restart.
func TestGroupBackoff(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, clk)
	tp := e.topic("q", TopicConfig{})
	e.group(tp, "g", GroupConfig{LeaseMs: 10000, MaxDeliveries: -1, BackoffMs: []int64{100, 300}})
	e.restart()
	tp, _ = e.b.Topic("q")
	g, _ := tp.FindGroup("g")
	if got := g.Config().BackoffMs; len(got) != 2 || got[0] != 100 || got[1] != 300 {
		t.Fatalf("backoff_ms after restart %v", got)
	}
	e.publish(tp, "a")
	// waitsThen: nothing ready until d has passed, then the redelivery.
	waitsThen := func(what string, d time.Duration, attempt uint32) Delivery {
		t.Helper()
		clk.Advance(d - time.Millisecond)
		if got := e.pollNow(g, 1, 0); len(got) != 0 {
			t.Fatalf("%s: redelivered before %v", what, d)
		}
		clk.Advance(time.Millisecond)
		var got []Delivery
		waitFor(t, what, func() bool { got = e.pollNow(g, 1, 0); return len(got) == 1 })
		if got[0].Attempt != attempt {
			t.Fatalf("%s: attempt %d, want %d", what, got[0].Attempt, attempt)
		}
		return got[0]
	}
	d := e.poll(g, 1)[0]
	if err := e.settle(d, Nack(0)); err != nil {
		t.Fatal(err)
	}
	d = waitsThen("nack after delivery 1", 100*time.Millisecond, 2)
	clk.Advance(10 * time.Second)          // the lease of delivery 2 ends
	waitFor(t, "the expiry", func() bool { // the delay counts from the expiry: let the actor run it first
		in, err := g.InfoCurrent(context.Background())
		return err == nil && in.Inflight == 0
	})
	d = waitsThen("expiry after delivery 2", 300*time.Millisecond, 3)
	if err := e.settle(d, Nack(0)); err != nil {
		t.Fatal(err)
	}
	d = waitsThen("nack after delivery 3 (last entry repeats)", 300*time.Millisecond, 4)
	if err := e.settle(d, Nack(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	waitsThen("nack with its own delay", 2*time.Second, 5)
}

// TestGroupBackoffInvalid: a schedule too long or with an entry out of
// range is ErrInvalid; an empty one is no schedule.
func TestGroupBackoffInvalid(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	for _, b := range [][]int64{make([]int64, 33), {1000, 0}, {-1}, {1 << 32}} {
		for i := range b {
			if b[i] == 0 && len(b) == 33 {
				b[i] = 1
			}
		}
		if _, err := tp.Group("g", GroupConfig{BackoffMs: b}); !errors.Is(err, ErrInvalid) {
			t.Errorf("backoff_ms %v: err %v, want ErrInvalid", b, err)
		}
	}
	long := make([]int64, 32)
	for i := range long {
		long[i] = maxLeaseMs
	}
	if _, err := tp.Group("long", GroupConfig{BackoffMs: long}); err != nil {
		t.Fatalf("32 entries of the longest lease: %v", err)
	}
	g := e.group(tp, "empty", GroupConfig{BackoffMs: []int64{}})
	if g.Config().BackoffMs != nil {
		t.Fatalf("empty backoff_ms stored as %v", g.Config().BackoffMs)
	}
	if !g.Config().Equal(mustResolve(t, GroupConfig{}, "q", "empty")) {
		t.Fatal("empty backoff_ms is another configuration than none")
	}
}

func mustResolve(t *testing.T, c GroupConfig, topic TopicName, group GroupName) GroupConfig {
	t.Helper()
	r, err := c.Resolve(topic, group)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
