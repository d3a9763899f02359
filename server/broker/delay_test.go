package broker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/wire"
)

func publishHdr(t *testing.T, tp *Topic, data string, kv ...string) {
	t.Helper()
	m := Message{Subject: string(tp.Name()), Data: []byte(data)}
	if len(kv) > 0 {
		m.Header = wire.AppendHeader(nil, kv...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := tp.Publish(ctx, m); err != nil {
		t.Fatalf("publish %s %v: %v", data, kv, err)
	}
}

// TestDelayedDelivery: a message with Fibril-Delay or Fibril-Deliver-At is
// handed out by no group before it is due, the messages after it flow on,
// and it comes once due, also to a poll already waiting; a crash in
// between keeps it held back (the defer events replay) and loses nothing.
func TestDelayedDelivery(t *testing.T) {
	clk := newFakeClock()
	e := newMemEnv(t, clk)
	tp := e.topic("q", TopicConfig{AllowMsgDelay: true})
	g := e.group(tp, "g", GroupConfig{})
	at := clk.Now().Add(2 * time.Second).Format(time.RFC3339Nano)
	publishHdr(t, tp, "later", wire.HeaderDelay, "5s")
	publishHdr(t, tp, "at", wire.HeaderDeliverAt, at)
	publishHdr(t, tp, "now")
	ds := e.pollNow(g, 10, 0)
	if got := datas(ds); !slices.Equal(got, []string{"now"}) {
		t.Fatalf("at once: %v, want only now", got)
	}
	if err := e.settle(ds[0], Ack()); err != nil {
		t.Fatal(err)
	}
	e = e.crashCopy() // no snapshot: the held-back offsets come from their events
	tp, _ = e.b.Topic("q")
	g, _ = tp.FindGroup("g")
	if got := datas(e.pollNow(g, 10, 0)); len(got) != 0 {
		t.Fatalf("after the crash, before any is due: %v", got)
	}
	type polled struct {
		ds  []Delivery
		err error
	}
	done := make(chan polled, 1)
	go func() { // parked: the due time must wake it
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ds, err := g.Poll(ctx, 10)
		done <- polled{ds, err}
	}()
	time.Sleep(20 * time.Millisecond)
	clk.Advance(2 * time.Second)
	if r := <-done; r.err != nil || !slices.Equal(datas(r.ds), []string{"at"}) {
		t.Fatalf("after 2 s: %v (%v), want at", datas(r.ds), r.err)
	}
	clk.Advance(2900 * time.Millisecond)
	if got := datas(e.pollNow(g, 10, 0)); len(got) != 0 {
		t.Fatalf("after 4.9 s: %v, want nothing yet", got)
	}
	clk.Advance(100 * time.Millisecond)
	var got []string
	waitFor(t, "later, once due", func() bool { got = append(got, datas(e.pollNow(g, 10, 0))...); return len(got) > 0 })
	if !slices.Equal(got, []string{"later"}) {
		t.Fatalf("after 5 s: %v, want later", got)
	}
}

// TestDelayedDeliveryInvalid: delay headers on a topic without
// allow_msg_delay, or with values that are not a delay or a time, fail the
// publish with ErrInvalidHeader and store nothing.
func TestDelayedDeliveryInvalid(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{AllowMsgDelay: true})
	plain := e.topic("plain", TopicConfig{})
	pub := func(tp *Topic, kv ...string) error {
		_, err := tp.Publish(context.Background(), Message{Subject: string(tp.Name()), Header: wire.AppendHeader(nil, kv...), Data: []byte("x")})
		return err
	}
	for _, kv := range [][]string{
		{wire.HeaderDelay, "0"}, {wire.HeaderDelay, "never"}, {wire.HeaderDelay, "soon"},
		{wire.HeaderDeliverAt, "tomorrow"}, {wire.HeaderDeliverAt, "2026-13-01T00:00:00Z"},
	} {
		if err := pub(tp, kv...); !errors.Is(err, ErrInvalidHeader) {
			t.Errorf("%v: %v, want ErrInvalidHeader", kv, err)
		}
	}
	if err := pub(plain, wire.HeaderDelay, "5s"); !errors.Is(err, ErrInvalidHeader) {
		t.Errorf("a delay on a topic without allow_msg_delay: %v", err)
	}
	if n := tp.Info().Messages + plain.Info().Messages; n != 0 {
		t.Fatalf("%d messages stored", n)
	}
}
