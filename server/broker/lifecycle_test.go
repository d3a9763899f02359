package broker

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// TestCloseNoLeaks: Close stops every goroutine the broker started, answers
// parked polls with ErrClosed, completes accepted publishes, and refuses
// new work with ErrClosed.
func TestCloseNoLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	e := &testEnv{t: t, dir: t.TempDir()}
	e.open()
	tp := e.topic("q", TopicConfig{Partitions: 3})
	g := e.group(tp, "g", GroupConfig{})
	parked := make(chan error, 1)
	if err := g.PollAsync(1, -1, 5, func(ds []Delivery, err error) { parked <- err }); err != nil {
		t.Fatal(err)
	}
	published := make(chan error, 100)
	for range 100 {
		if err := tp.PublishAsync(Message{Subject: "q", Data: []byte("x")}, func(_ Position, err error) { published <- err }); err != nil {
			t.Fatal(err)
		}
	}
	// the parked poll is answered by the first publish; park another one
	// on a topic that stays empty
	empty := e.topic("empty", TopicConfig{})
	eg := e.group(empty, "g", GroupConfig{})
	if err := eg.PollAsync(1, -1, 5, func(ds []Delivery, err error) { parked <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-parked; err != nil {
		t.Fatalf("first poll: %v", err)
	}
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := <-published; err != nil {
			t.Fatalf("accepted publish failed at close: %v", err)
		}
	}
	select {
	case err := <-parked:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("parked poll at close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("parked poll not answered at close")
	}
	if err := tp.PublishAsync(Message{Subject: "q", Data: []byte("x")}, func(Position, error) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("publish after close: %v", err)
	}
	if _, err := tp.Publish(context.Background(), Message{Subject: "q", Data: []byte("x")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("sync publish after close: %v", err)
	}
	if err := e.b.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	e.b = nil
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

func TestDeleteGroup(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "g", GroupConfig{})
	e.publish(tp, "a")
	d := e.poll(g, 1)[0]
	if err := tp.DeleteGroup("g"); err != nil {
		t.Fatal(err)
	}
	if err := e.settle(d, Ack()); !errors.Is(err, ErrUnknownHandle) {
		t.Fatalf("ack for a deleted group: %v", err)
	}
	if err := tp.DeleteGroup("g"); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("second delete: %v", err)
	}
	g2 := e.group(tp, "g", GroupConfig{})
	if g2.ID() == g.ID() {
		t.Fatal("group id reused")
	}
	e.restart()
	tp, _ = e.b.Topic("q")
	if gs := tp.Groups(); len(gs) != 1 || gs[0].ID() != g2.ID() {
		t.Fatalf("groups after restart: %v", gs)
	}
}

func TestInvalidArguments(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "g", GroupConfig{})
	tests := []struct {
		name string
		err  error
	}{
		{"bad partitions", func() error { _, err := e.b.CreateTopic("x", TopicConfig{Partitions: -1}); return err }()},
		{"bad durability", func() error { _, err := e.b.CreateTopic("x", TopicConfig{Durability: "maybe"}); return err }()},
		{"bad filter", func() error { _, err := e.b.CreateTopic("x", TopicConfig{Subjects: []string{"a.>.b"}}); return err }()},
		{"wildcard name", func() error { _, err := e.b.CreateTopic("x.*", TopicConfig{}); return err }()},
		{"bad group name", func() error { _, err := tp.Group("a.b", GroupConfig{}); return err }()},
		{"bad lease", func() error { _, err := tp.Group("h", GroupConfig{LeaseMs: -5}); return err }()},
		{"bad start", func() error { _, err := tp.Group("h", GroupConfig{Start: "middle"}); return err }()},
		{"poll max 0", g.PollAsync(0, 0, 0, func([]Delivery, error) {})},
		{"subscribe credit 0", func() error { _, err := g.Subscribe(1, 0, func(Delivery) {}); return err }()},
		{"empty subject", tp.PublishAsync(Message{}, func(Position, error) {})},
		{"settle bad kind", e.b.Settle(Handle{Topic: tp.ID()}, SettleOp{}, nil)},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", tt.name, tt.err)
		}
	}
	if _, err := Open(t.TempDir(), Options{QueueSize: -1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad options: %v", err)
	}
}

func TestTooLarge(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	big := make([]byte, 64<<10) // the tests' data segments are 64 KiB
	if _, err := tp.Publish(context.Background(), Message{Subject: "q", Data: big}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized publish: %v", err)
	}
	e.publish(tp, "small still works")
}

// TestLargeRoundRestart: one round delivers thousands of messages, so its
// events span several event records; all of them must replay.
func TestLargeRoundRestart(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "g", GroupConfig{})
	const n = 3000
	done := make(chan error, n)
	for i := 0; i < n; {
		err := tp.PublishAsync(Message{Subject: "q", Data: []byte("x")}, func(_ Position, err error) { done <- err })
		if errors.Is(err, ErrQueueFull) {
			runtime.Gosched()
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		i++
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for got < n {
		got += len(e.poll(g, n))
	}
	e.restart()
	tp, _ = e.b.Topic("q")
	g, _ = tp.FindGroup("g")
	got = 0
	for got < n {
		for _, d := range e.poll(g, n) {
			if d.Attempt != 2 {
				t.Fatalf("offset %d attempt %d after restart, want 2", d.Handle.Seq, d.Attempt)
			}
			got++
		}
	}
}
