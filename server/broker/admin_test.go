package broker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPauseResumeAcrossRestart(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("jobs", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{})
	for _, s := range []string{"a", "b", "c"} {
		e.publish(tp, s)
	}
	held := e.poll(g, 1)[0] // leased before the pause
	if err := g.Pause(); err != nil {
		t.Fatal(err)
	}
	if !g.Paused() || !g.Info().Paused {
		t.Fatal("not paused")
	}
	if got := e.pollNow(g, 10, 0); len(got) != 0 {
		t.Fatalf("paused group delivered %v", datas(got))
	}
	if err := e.settle(held, Ack()); err != nil {
		t.Fatalf("settle while paused: %v", err)
	}
	waitFor(t, "ack counted", func() bool { return g.Info().Acked == 1 })

	e.restart()
	tp, _ = e.b.Topic("jobs")
	g, _ = tp.FindGroup("w")
	if !g.Paused() {
		t.Fatal("pause lost across restart")
	}
	if got := e.pollNow(g, 10, 0); len(got) != 0 {
		t.Fatalf("paused group delivered after restart %v", datas(got))
	}
	// a waiting poll parks while paused and is served on resume
	ch := make(chan []Delivery, 1)
	if err := g.PollAsync(10, -1, 0, func(ds []Delivery, err error) {
		out := make([]Delivery, len(ds))
		for i := range ds {
			out[i] = ds[i].clone()
		}
		ch <- out
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case ds := <-ch:
		t.Fatalf("paused group answered a waiting poll with %v", datas(ds))
	default:
	}
	// a subscription gets nothing while paused either
	got := make(chan string, 10)
	sub, err := g.Subscribe(7, 10, func(d Delivery) { got <- string(d.Data) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := g.Resume(); err != nil {
		t.Fatal(err)
	}
	var all []string
	select {
	case ds := <-ch:
		all = append(all, datas(ds)...)
	case <-time.After(5 * time.Second):
		t.Fatal("waiting poll not served after resume")
	}
	for len(all) < 2 {
		select {
		case s := <-got:
			all = append(all, s)
		case <-time.After(5 * time.Second):
			t.Fatalf("after resume got %v, want b and c", all)
		}
	}
	slices.Sort(all)
	if !slices.Equal(all, []string{"b", "c"}) {
		t.Fatalf("after resume got %v, want [b c]", all)
	}
	e.restart()
	tp, _ = e.b.Topic("jobs")
	if g, _ := tp.FindGroup("w"); g.Paused() {
		t.Fatal("resume lost across restart")
	}
}

func TestPurgeTopic(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("jobs", TopicConfig{Partitions: 2})
	g1 := e.group(tp, "a", GroupConfig{})
	g2 := e.group(tp, "b", GroupConfig{})
	for i := 0; i < 10; i++ {
		e.publish(tp, "old")
	}
	held := e.poll(g1, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tp.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*Group{g1, g2} {
		if in := g.Info(); in.Pending != 0 || in.Inflight != 0 {
			t.Fatalf("group %s after purge: pending %d inflight %d", g.Name(), in.Pending, in.Inflight)
		}
		if got := e.pollNow(g, 10, 0); len(got) != 0 {
			t.Fatalf("purged messages delivered: %v", datas(got))
		}
	}
	if err := e.settle(held, Ack()); err != nil {
		t.Fatalf("ack of a purged delivery: %v (want idempotent nil)", err)
	}
	if in := tp.Info(); in.Messages != 0 || in.Unsettled != 0 {
		t.Fatalf("topic after purge: %d messages, %d unsettled", in.Messages, in.Unsettled)
	}
	e.publish(tp, "new")
	e.restart()
	tp, _ = e.b.Topic("jobs")
	g2, _ = tp.FindGroup("b")
	late := e.group(tp, "late", GroupConfig{}) // starts after the purge
	for _, g := range []*Group{g2, late} {
		ds := e.poll(g, 10)
		if !slices.Equal(datas(ds), []string{"new"}) {
			t.Fatalf("group %s after purge and restart: %v, want [new]", g.Name(), datas(ds))
		}
	}
}

// The purge floor survives a snapshot (the events before it are dropped),
// so a group created after a restart does not see purged messages.
func TestPurgeFloorInSnapshot(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("logs", TopicConfig{Retention: RetentionLimits})
	for i := 0; i < 5; i++ {
		e.publish(tp, "old")
	}
	if err := tp.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.publish(tp, "new")
	e.restart() // Close writes a snapshot and truncates the events
	tp, _ = e.b.Topic("logs")
	g := e.group(tp, "g", GroupConfig{})
	if ds := e.poll(g, 10); !slices.Equal(datas(ds), []string{"new"}) {
		t.Fatalf("got %v, want [new]", datas(ds))
	}
}

func TestRequeueDeadLetters(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("jobs", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{MaxDeliveries: 1})
	hdr := "NATS/1.0\r\nTrace: 7\r\n\r\n"
	for _, s := range []string{"p1", "p2", "p3"} {
		if _, err := tp.Publish(context.Background(), Message{Subject: "jobs", Header: []byte(hdr), Data: []byte(s)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range e.poll(g, 3) {
		if err := e.settle(d, Nack(0)); err != nil {
			t.Fatal(err)
		}
	}
	dlq := TopicName(DeadLetterTopic("jobs", "w"))
	waitFor(t, "dead-lettered", func() bool { return g.Info().DeadLettered == 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := e.b.Requeue(ctx, dlq, 2)
	if err != nil || n != 2 {
		t.Fatalf("Requeue = %d, %v; want 2", n, err)
	}
	ds := e.poll(g, 10)
	if len(ds) != 2 {
		t.Fatalf("requeued deliveries %v, want 2", datas(ds))
	}
	for _, d := range ds {
		h := string(d.Header)
		if !strings.Contains(h, "Trace: 7\r\n") || strings.Contains(h, "Fibril-") || !strings.HasSuffix(h, "\r\n\r\n") {
			t.Fatalf("requeued header %q", h)
		}
		if d.Attempt != 1 {
			t.Fatalf("requeued message attempt %d, want 1 (a new message)", d.Attempt)
		}
		if err := e.settle(d, Ack()); err != nil {
			t.Fatal(err)
		}
	}
	e.restart()
	n, err = e.b.Requeue(ctx, dlq, 10)
	if err != nil || n != 1 {
		t.Fatalf("Requeue after restart = %d, %v; want the 1 left", n, err)
	}
	n, err = e.b.Requeue(ctx, dlq, 10)
	if err != nil || n != 0 {
		t.Fatalf("Requeue of an empty DLQ = %d, %v; want 0", n, err)
	}
	dt, _ := e.b.Topic(dlq)
	rg, _ := dt.FindGroup(RequeueGroup)
	// Counters are kept across the restart: 2 acked before, 1 after.
	if in := rg.Info(); in.Pending != 0 || in.Acked != 3 {
		t.Fatalf("requeue group: pending %d acked %d", in.Pending, in.Acked)
	}
	// The requeue group is internal: no listing shows it (it used to be a
	// visible group "requeue").
	if gs, in := dt.Groups(), dt.Info(); len(gs) != 0 || len(in.Groups) != 0 {
		t.Fatalf("%s lists groups %v / %v after requeues, want none", dlq, gs, in.Groups)
	}
	tp, _ = e.b.Topic("jobs")
	g, _ = tp.FindGroup("w")
	if ds := e.poll(g, 10); !slices.Equal(datas(ds), []string{"p3"}) {
		t.Fatalf("got %v, want [p3]", datas(ds))
	}
}

func TestRequeueErrors(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if _, err := e.b.Requeue(ctx, "$DLQ.none.g", 1); !errors.Is(err, ErrNoTopic) {
		t.Fatalf("missing topic: %v", err)
	}
	tp := e.topic("jobs", TopicConfig{})
	e.group(tp, "w", GroupConfig{})
	dlq := TopicName(DeadLetterTopic("jobs", "w"))
	if _, err := e.b.Requeue(ctx, dlq, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("max 0: %v", err)
	}
	dt, _ := e.b.Topic(dlq)
	// a message without Fibril-Subject cannot be moved; it stays
	if _, err := dt.Publish(ctx, Message{Subject: string(dlq), Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.b.Requeue(ctx, dlq, 5); n != 0 || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Requeue without subject = %d, %v", n, err)
	}
	rg, _ := dt.FindGroup(RequeueGroup)
	waitFor(t, "put back", func() bool { in := rg.Info(); return in.Pending == 1 && in.Inflight == 0 })
}

// TestRequeueOfADeletedTopicIsRefused: deleting a topic leaves its
// dead-letter topic; a requeue of it is refused with ErrNoTopic saying no
// topic captures the subject now, and the dead letters stay.
func TestRequeueOfADeletedTopicIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	tp := e.topic("t00", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{MaxDeliveries: 1})
	e.publish(tp, "x")
	for _, d := range e.poll(g, 1) {
		if err := e.settle(d, Reject()); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "dead-lettered", func() bool { return g.Info().DeadLettered == 1 })
	if err := e.b.DeleteTopic("t00"); err != nil {
		t.Fatal(err)
	}
	dlq := TopicName(DeadLetterTopic("t00", "w"))
	n, err := e.b.Requeue(ctx, dlq, 5)
	if n != 0 || !errors.Is(err, ErrNoTopic) || !strings.Contains(err.Error(), `no topic captures "t00" now`) {
		t.Fatalf("Requeue = %d, %v", n, err)
	}
	dt, _ := e.b.Topic(dlq)
	rg, _ := dt.FindGroup(RequeueGroup)
	waitFor(t, "put back", func() bool { in := rg.Info(); return in.Pending == 1 && in.Inflight == 0 })
}

func TestHeaderHelpers(t *testing.T) {
	cases := []struct {
		in, want string
	}{
		{"", ""},
		{"NATS/1.0\r\n\r\n", ""},
		{"NATS/1.0\r\nFibril-Seq: 1\r\n\r\n", ""},
		{"NATS/1.0\r\nA: 1\r\nfibril-reason: x\r\nB: 2\r\n\r\n", "NATS/1.0\r\nA: 1\r\nB: 2\r\n\r\n"},
	}
	for _, c := range cases {
		if got := string(stripHeaders([]byte(c.in), dlqHeaderNames)); got != c.want {
			t.Errorf("stripHeaders(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if v := headerValue([]byte("NATS/1.0\r\nfibril-subject:  a.b \r\n\r\n"), "Fibril-Subject"); v != "a.b" {
		t.Errorf("headerValue = %q", v)
	}
}
