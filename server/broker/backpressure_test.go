package broker

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBackpressureReject(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{MaxUnsettledMsgs: 3, FullPolicy: FullReject})
	g := e.group(tp, "g", GroupConfig{})
	for range 3 {
		e.publish(tp, "x")
	}
	waitFor(t, "unsettled 3", func() bool { return tp.Info().Unsettled == 3 })
	if _, err := tp.Publish(context.Background(), Message{Subject: "q", Data: []byte("y")}); !errors.Is(err, ErrTopicFull) {
		t.Fatalf("sync publish on full topic: %v", err)
	}
	if err := tp.PublishAsync(Message{Subject: "q", Data: []byte("y")}, func(Position, error) {}); !errors.Is(err, ErrTopicFull) {
		t.Fatalf("async publish on full topic: %v", err)
	}
	d := e.poll(g, 1)[0]
	if err := e.settle(d, Ack()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "room after ack", func() bool { return tp.Info().Unsettled == 2 })
	e.publish(tp, "z")
}

func TestBackpressureBlock(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{MaxUnsettledMsgs: 2})
	g := e.group(tp, "g", GroupConfig{})
	e.publish(tp, "a")
	e.publish(tp, "b")
	waitFor(t, "unsettled 2", func() bool { return tp.Info().Unsettled == 2 })
	// block until ctx ends
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := tp.Publish(ctx, Message{Subject: "q", Data: []byte("c")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked publish: %v", err)
	}
	// async callers never block
	if err := tp.PublishAsync(Message{Subject: "q", Data: []byte("c")}, func(Position, error) {}); !errors.Is(err, ErrTopicFull) {
		t.Fatalf("async publish: %v", err)
	}
	// a blocked publish proceeds once a message is settled
	res := make(chan error, 1)
	go func() {
		_, err := tp.Publish(context.Background(), Message{Subject: "q", Data: []byte("c")})
		res <- err
	}()
	d := e.poll(g, 1)[0]
	select {
	case err := <-res:
		t.Fatalf("publish did not block: %v", err)
	default:
	}
	if err := e.settle(d, Ack()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("blocked publish never resumed")
	}
}

func TestBackpressureBytes(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{MaxUnsettledBytes: 1000, FullPolicy: FullReject})
	e.group(tp, "g", GroupConfig{})
	big := string(make([]byte, 400))
	e.publish(tp, big)
	e.publish(tp, big)
	e.publish(tp, big)
	waitFor(t, "bytes over limit", func() bool { _, b := tp.unsettled(); return b >= 1000 })
	if _, err := tp.Publish(context.Background(), Message{Subject: "q", Data: []byte("y")}); !errors.Is(err, ErrTopicFull) {
		t.Fatalf("publish over byte limit: %v", err)
	}
}

// TestQueueFull: a ring of 2 slots whose actor is stuck fills up; async
// callers get ErrQueueFull at once, sync callers wait with their context.
func TestQueueFull(t *testing.T) {
	e := newEnvWith(t, func(o *Options) { o.QueueSize = 2 })
	tp := e.topic("q", TopicConfig{})
	stuck, release := make(chan struct{}), make(chan struct{})
	tp.parts[0].control(func(p *partition) { close(stuck); <-release })
	<-stuck
	nop := func(Position, error) {}
	var full error
	for range 3 {
		full = tp.PublishAsync(Message{Subject: "q", Data: []byte("x")}, nop)
	}
	if !errors.Is(full, ErrQueueFull) {
		t.Fatalf("third async publish into a 2-slot ring: %v", full)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := tp.Publish(ctx, Message{Subject: "q", Data: []byte("y")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("sync publish into a full ring: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := tp.Publish(context.Background(), Message{Subject: "q", Data: []byte("z")})
		done <- err
	}()
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sync publish did not resume")
	}
}

// TestBlockedPublishEndsAtClose: a publish waiting for room fails with
// ErrClosed when the broker closes, instead of waiting for its context.
func TestBlockedPublishEndsAtClose(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{MaxUnsettledMsgs: 1})
	e.group(tp, "g", GroupConfig{})
	e.publish(tp, "a")
	waitFor(t, "full", func() bool { return tp.full() })
	res := make(chan error, 1)
	go func() {
		_, err := tp.Publish(context.Background(), Message{Subject: "q", Data: []byte("b")})
		res <- err
	}()
	e.b.Close()
	select {
	case err := <-res:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("blocked publish at close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("blocked publish still waiting after Close")
	}
}

// TestByteLimitAfterRestart: the unsettled-bytes limit holds right after a
// restart, before anything new is published.
func TestByteLimitAfterRestart(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{MaxUnsettledBytes: 1000, FullPolicy: FullReject})
	e.group(tp, "g", GroupConfig{})
	big := string(make([]byte, 400))
	for range 3 {
		e.publish(tp, big)
	}
	e.restart()
	tp, _ = e.b.Topic("q")
	if _, err := tp.Publish(context.Background(), Message{Subject: "q", Data: []byte("y")}); !errors.Is(err, ErrTopicFull) {
		t.Fatalf("publish over byte limit after restart: %v", err)
	}
}

// Byte limits count real message sizes: one large message, once settled,
// no longer weighs on the small ones that follow (an average would).
func TestUnsettledBytesAreReal(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("jobs", TopicConfig{MaxUnsettledBytes: 1000, FullPolicy: FullReject})
	g := e.group(tp, "w", GroupConfig{})
	ctx := context.Background()
	if _, err := tp.Publish(ctx, Message{Subject: "jobs", Data: make([]byte, 900)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "900 unsettled bytes", func() bool { return tp.Info().UnsettledBytes == 900 })
	if err := e.settle(e.poll(g, 1)[0], Ack()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "settled", func() bool { return tp.Info().UnsettledBytes == 0 })
	for i := 0; i < 50; i++ {
		if _, err := tp.Publish(ctx, Message{Subject: "jobs", Data: make([]byte, 10)}); err != nil {
			t.Fatalf("small publish %d: %v", i, err)
		}
	}
	waitFor(t, "500 unsettled bytes", func() bool {
		in := tp.Info()
		return in.UnsettledBytes == 500 && in.Unsettled == 50 && in.Partitions[0].UnsettledBytes == 500
	})
	for i := 0; i < 49; i++ {
		if _, err := tp.Publish(ctx, Message{Subject: "jobs", Data: make([]byte, 10)}); err != nil {
			t.Fatalf("small publish %d: %v", 50+i, err)
		}
	}
	waitFor(t, "990 unsettled bytes", func() bool { return tp.Info().UnsettledBytes == 990 })
	if _, err := tp.Publish(ctx, Message{Subject: "jobs", Data: make([]byte, 10)}); err != nil {
		t.Fatal(err) // 990 < 1000: room for one more
	}
	waitFor(t, "full", func() bool { return tp.Info().UnsettledBytes == 1000 })
	if _, err := tp.Publish(ctx, Message{Subject: "jobs", Data: []byte("x")}); !errors.Is(err, ErrTopicFull) {
		t.Fatalf("publish over the byte limit: %v, want ErrTopicFull", err)
	}
}
