package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestBrowseMessagesAndTime(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, clk)
	tp := e.topic("jobs", TopicConfig{})
	ctx := context.Background()
	start := clk.Now()
	for i := 1; i <= 5; i++ {
		if _, err := tp.Publish(ctx, Message{Subject: "jobs", Header: []byte("NATS/1.0\r\nN: " + fmt.Sprint(i) + "\r\n\r\n"), Data: []byte(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	ms, next, err := tp.Browse(ctx, 0, 0, 2)
	if err != nil || len(ms) != 2 || next != 3 || ms[0].Seq != 1 || string(ms[1].Data) != "m2" || string(ms[1].Header) != "NATS/1.0\r\nN: 2\r\n\r\n" {
		t.Fatalf("Browse(0, 2) = %+v, next %d, %v", ms, next, err)
	}
	ms, next, err = tp.Browse(ctx, 0, next, 10)
	if err != nil || len(ms) != 3 || next != 6 || ms[2].Seq != 5 || ms[2].Subject != "jobs" {
		t.Fatalf("Browse(3, 10) = %d messages, next %d, %v", len(ms), next, err)
	}
	if ms, n2, err := tp.Browse(ctx, 0, next, 10); err != nil || len(ms) != 0 || n2 != 6 {
		t.Fatalf("Browse past the end = %d, next %d, %v", len(ms), n2, err)
	}
	if at, err := tp.SeqAt(ctx, 0, start.Add(2500*time.Millisecond)); err != nil || at != 4 {
		t.Fatalf("SeqAt(+2.5s) = %d, %v; want 4", at, err)
	}
	// browsing consumes nothing
	g := e.group(tp, "w", GroupConfig{})
	if ds := e.poll(g, 10); len(ds) != 5 {
		t.Fatalf("group got %d after browsing, want 5", len(ds))
	}
	if err := tp.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if ms, _, err := tp.Browse(ctx, 0, 1, 10); err != nil || len(ms) != 0 {
		t.Fatalf("purged messages browsed: %d, %v", len(ms), err)
	}
	if _, _, err := tp.Browse(ctx, 3, 1, 10); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad partition: %v", err)
	}
	if _, _, err := tp.Browse(ctx, 0, 1, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("max 0: %v", err)
	}
}

func TestBrowseEvents(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("jobs", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{})
	e.publish(tp, "a")
	e.publish(tp, "b")
	d := e.poll(g, 1)[0]
	if err := e.settle(d, Ack()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := tp.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	var all []StateEvent
	for next := Seq(0); ; {
		evs, n, err := tp.Events(ctx, 0, next, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		all = append(all, evs...)
		next = n
	}
	var got []string
	for _, ev := range all {
		got = append(got, fmt.Sprintf("%s g%d @%d %d", ev.Kind, ev.Group, ev.Offset, ev.Arg))
	}
	want := []string{
		fmt.Sprintf("init g%d @1 0", g.ID()),
		fmt.Sprintf("deliver g%d @1 1", g.ID()),
		fmt.Sprintf("settle g%d @1 0", g.ID()),
		"purge g0 @3 0",
		fmt.Sprintf("purge g%d @3 0", g.ID()),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}
	hist, err := tp.History(ctx, 0, 2) // never delivered, then purged
	if err != nil || len(hist) != 2 || hist[0].Kind != "purge" || hist[1].Group != g.ID() {
		t.Fatalf("History(2) = %+v, %v", hist, err)
	}
	hist, err = tp.History(ctx, 0, 1)
	if err != nil || len(hist) != 4 || hist[0].Kind != "deliver" || hist[1].Kind != "settle" || hist[2].Kind != "purge" {
		t.Fatalf("History(1) = %+v, %v", hist, err)
	}
}
