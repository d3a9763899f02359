package broker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestRequeueSelected: dead letters requeued by original subject or by
// offset range go back to their topic and are settled in the requeue
// group by offset, ahead of its head; that survives a crash (the events
// replayed) and a restart, and a later requeue of everything moves only
// the others.
func TestRequeueSelected(t *testing.T) {
	e := newMemEnv(t, nil)
	tp := e.topic("orders", TopicConfig{Subjects: []string{"orders.>"}})
	g := e.group(tp, "g", GroupConfig{})
	for _, s := range []string{"orders.eu.1", "orders.us.1", "orders.eu.2", "orders.us.2"} {
		publishTo(t, tp, s, s)
	}
	ds := e.poll(g, 10)
	if len(ds) != 4 {
		t.Fatalf("polled %d", len(ds))
	}
	for _, d := range ds {
		if err := e.settle(d, Reject()); err != nil {
			t.Fatal(err)
		}
	}
	dlq := TopicName(DeadLetterTopic("orders", "g"))
	waitFor(t, "four dead letters", func() bool {
		d, ok := e.b.Topic(dlq)
		return ok && d.Info().Messages == 4
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	requeue := func(what string, sel RequeueSelect, want ...string) {
		t.Helper()
		n, err := e.b.RequeueSelected(ctx, dlq, sel)
		if err != nil || n != len(want) {
			t.Fatalf("%s: moved %d (%v), want %d", what, n, err, len(want))
		}
		tp, _ := e.b.Topic("orders")
		g, _ := tp.FindGroup("g")
		var got []string
		waitFor(t, what+": the requeued messages", func() bool {
			for _, d := range e.pollNow(g, 10, 0) {
				got = append(got, string(d.Data))
				if err := e.settle(d, Ack()); err != nil {
					t.Fatal(err)
				}
			}
			return len(got) >= len(want)
		})
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: group g got %v, want %v", what, got, want)
		}
		for _, d := range e.pollNow(g, 10, 0) {
			t.Fatalf("%s: also %s", what, d.Data)
		}
	}
	requeue("by filter", RequeueSelect{Max: 10, Filter: []string{"orders.eu.>"}}, "orders.eu.1", "orders.eu.2")
	e = e.crashCopy() // no snapshot at close: the settles ahead of the head are replayed from the events
	requeue("by range", RequeueSelect{Max: 10, FromSeq: 4, ToSeq: 4}, "orders.us.2")
	requeue("the same filter again", RequeueSelect{Max: 10, Filter: []string{"orders.eu.>"}})
	e.restart()
	requeue("everything else", RequeueSelect{Max: 10}, "orders.us.1")
	requeue("nothing left", RequeueSelect{Max: 10})
}

// TestRequeueSelectedMax: max bounds a selective requeue, in offset order.
func TestRequeueSelectedMax(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "g", GroupConfig{})
	for _, s := range []string{"a", "b", "c"} {
		e.publish(tp, s)
	}
	for _, d := range e.poll(g, 10) {
		if err := e.settle(d, Reject()); err != nil {
			t.Fatal(err)
		}
	}
	dlq := TopicName(DeadLetterTopic("q", "g"))
	waitFor(t, "dead letters", func() bool { d, ok := e.b.Topic(dlq); return ok && d.Info().Messages == 3 })
	n, err := e.b.RequeueSelected(context.Background(), dlq, RequeueSelect{Max: 2, FromSeq: 1})
	if err != nil || n != 2 {
		t.Fatalf("moved %d, %v", n, err)
	}
	if got := datas(e.poll(g, 10)); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("got %v", got)
	}
}

// TestRequeueSelectedInvalid: a bad selection is ErrInvalid, an unknown
// topic ErrNoTopic.
func TestRequeueSelectedInvalid(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	e.group(tp, "g", GroupConfig{})
	dlq := TopicName(DeadLetterTopic("q", "g"))
	for _, sel := range []RequeueSelect{{Max: 0}, {Max: 1, FromSeq: 5, ToSeq: 4}, {Max: 1, Filter: []string{"a..b"}}, {Max: 1, Filter: make([]string, 65)}} {
		if _, err := e.b.RequeueSelected(context.Background(), dlq, sel); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", sel, err)
		}
	}
	if _, err := e.b.RequeueSelected(context.Background(), "nosuch", RequeueSelect{Max: 1, FromSeq: 1}); !errors.Is(err, ErrNoTopic) {
		t.Errorf("unknown topic: %v", err)
	}
}

// TestRequeueToANamedTopic: a deleted topic's dead letters are refused by
// a plain requeue (no topic captures their subject) and go back with To,
// under their original subject; an unknown To is ErrNoTopic.
func TestRequeueToANamedTopic(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("old", TopicConfig{})
	g := e.group(tp, "g", GroupConfig{})
	e.publish(tp, "x")
	if err := e.settle(e.poll(g, 1)[0], Reject()); err != nil {
		t.Fatal(err)
	}
	dlq := TopicName(DeadLetterTopic("old", "g"))
	waitFor(t, "the dead letter", func() bool { d, ok := e.b.Topic(dlq); return ok && d.Info().Messages == 1 })
	if err := e.b.DeleteTopic("old"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if n, err := e.b.RequeueSelected(ctx, dlq, RequeueSelect{Max: 10}); n != 0 || !errors.Is(err, ErrNoTopic) {
		t.Fatalf("plain requeue of a deleted topic's dead letters: %d %v", n, err)
	}
	if _, err := e.b.RequeueSelected(ctx, dlq, RequeueSelect{Max: 10, To: "nosuch"}); !errors.Is(err, ErrNoTopic) {
		t.Fatalf("unknown To: %v", err)
	}
	nt := e.topic("new", TopicConfig{})
	ng := e.group(nt, "g", GroupConfig{})
	if n, err := e.b.RequeueSelected(ctx, dlq, RequeueSelect{Max: 10, To: "new"}); n != 1 || err != nil {
		t.Fatalf("requeue to new: %d %v", n, err)
	}
	d := e.poll(ng, 10)
	if len(d) != 1 || string(d[0].Data) != "x" || d[0].Subject != "old" {
		t.Fatalf("got %v (subject %q)", datas(d), d[0].Subject)
	}
}
