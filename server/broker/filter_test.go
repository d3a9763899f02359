package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func publishTo(t *testing.T, tp *Topic, subject, data string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := tp.Publish(ctx, Message{Subject: subject, Data: []byte(data)}); err != nil {
		t.Fatalf("Publish %s: %v", subject, err)
	}
}

// TestGroupFilter: a group with a subject filter receives only the
// matching messages, in order, past a backlog of others longer than one
// scan (filterScan), and keeps its filter across a restart.
func TestGroupFilter(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("orders", TopicConfig{Subjects: []string{"orders.>"}})
	eu := e.group(tp, "eu", GroupConfig{Filter: []string{"orders.eu.>", "orders.*.vip"}})
	all := e.group(tp, "all", GroupConfig{})
	publishTo(t, tp, "orders.eu.1", "e1")
	publishTo(t, tp, "orders.us.1", "u1")
	publishTo(t, tp, "orders.us.vip", "v1")
	publishTo(t, tp, "orders.eu.2", "e2")
	if got := datas(e.poll(eu, 10)); !slices.Equal(got, []string{"e1", "v1", "e2"}) {
		t.Fatalf("filtered group got %v", got)
	}
	if got := datas(e.poll(all, 10)); len(got) != 4 {
		t.Fatalf("unfiltered group got %v", got)
	}
	for i := range 2*filterScan + 10 {
		publishTo(t, tp, "orders.us.x", fmt.Sprint(i))
	}
	publishTo(t, tp, "orders.eu.3", "e3")
	if got := datas(e.poll(eu, 10)); !slices.Equal(got, []string{"e3"}) {
		t.Fatalf("after a backlog of others got %v", got)
	}
	e.restart()
	tp, _ = e.b.Topic("orders")
	eu, _ = tp.FindGroup("eu")
	if f := eu.Config().Filter; !slices.Equal(f, []string{"orders.eu.>", "orders.*.vip"}) {
		t.Fatalf("filter after restart %v", f)
	}
	publishTo(t, tp, "orders.us.2", "u2")
	publishTo(t, tp, "orders.eu.4", "e4")
	// the leases ended with the restart: the unacked matches come back,
	// the filtered records stay settled
	if got := datas(e.poll(eu, 10)); !slices.Equal(got, []string{"e1", "v1", "e2", "e3", "e4"}) {
		t.Fatalf("after restart got %v", got)
	}
}

// TestGroupFilterBacklog: a group created behind a backlog of others
// longer than several scans (filterScan) skips it over several rounds and
// serves the match behind it to a waiting poll (the fake clock fires no
// timer that would run those rounds).
func TestGroupFilterBacklog(t *testing.T) {
	e := newEnv(t, newFakeClock())
	// durability none: no fsync completion wakes the actor either
	tp := e.topic("orders", TopicConfig{Subjects: []string{"orders.>"}, Durability: DurabilityNone})
	for i := range 3*filterScan + 10 {
		publishTo(t, tp, "orders.us.x", fmt.Sprint(i))
	}
	publishTo(t, tp, "orders.eu.1", "e1")
	late := e.group(tp, "late", GroupConfig{Filter: []string{"orders.eu.>"}})
	if got := datas(e.poll(late, 10)); !slices.Equal(got, []string{"e1"}) {
		t.Fatalf("got %v", got)
	}
}

// TestGroupFilterRetention: under workqueue retention, messages a group's
// filter does not match are not kept for it, though it never polls.
func TestGroupFilterRetention(t *testing.T) {
	clk := newFakeClock()
	e := newMemEnv(t, clk)
	tp := e.topic("orders", TopicConfig{Subjects: []string{"orders.>"}})
	eu := e.group(tp, "eu", GroupConfig{Filter: []string{"orders.eu.>"}})
	publishTo(t, tp, "orders.us.1", "u1")
	publishTo(t, tp, "orders.us.2", "u2")
	publishTo(t, tp, "orders.eu.1", "e1")
	clk.Advance(time.Second) // let a retention pass run
	waitFor(t, "the filtered messages removed", func() bool { return tp.Info().Messages == 1 })
	if got := datas(e.poll(eu, 10)); !slices.Equal(got, []string{"e1"}) {
		t.Fatalf("got %v", got)
	}
}

// TestGroupFilterInvalid: a filter that is not a subject filter, or too
// many of them, is ErrInvalid.
func TestGroupFilterInvalid(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("orders", TopicConfig{Subjects: []string{"orders.>"}})
	for _, f := range [][]string{{""}, {"orders..x"}, {"orders.>.x"}, {"$F.x"}, make([]string, 65)} {
		for i := range f {
			if len(f) == 65 {
				f[i] = "orders.x"
			}
		}
		if _, err := tp.Group("g", GroupConfig{Filter: f}); !errors.Is(err, ErrInvalid) {
			t.Errorf("filter %q: err %v, want ErrInvalid", f, err)
		}
	}
	g := e.group(tp, "empty", GroupConfig{Filter: []string{}})
	if g.Config().Filter != nil {
		t.Fatalf("empty filter stored as %v", g.Config().Filter)
	}
}
