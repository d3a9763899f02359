package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
	waitFor(t, "bytes near the limit", func() bool { _, b := tp.unsettled(); return b == 800 })
	if _, err := tp.Publish(context.Background(), Message{Subject: "q", Data: make([]byte, 201)}); !errors.Is(err, ErrTopicFull) {
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
	for range 2 {
		e.publish(tp, big)
	}
	e.restart()
	tp, _ = e.b.Topic("q")
	if _, err := tp.Publish(context.Background(), Message{Subject: "q", Data: make([]byte, 201)}); !errors.Is(err, ErrTopicFull) {
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

// TestMaxUnsettledNeverExceeded: the limits were checked against counters
// the partitions update only after appending, so publishes in flight were
// not counted: max_unsettled_msgs 100 with reject accepted 128 (one
// partition), 163 (three), 1,000 in one batch; max_unsettled_bytes went
// 2.4x over. Concurrent publishers on several partitions must never pass
// either limit.
func TestMaxUnsettledNeverExceeded(t *testing.T) {
	for _, parts := range []int{1, 3} {
		e := newEnv(t, nil)
		tp := e.topic(TopicName(fmt.Sprintf("q%d", parts)), TopicConfig{Partitions: parts, MaxUnsettledMsgs: 100,
			MaxUnsettledBytes: 100 * 64, FullPolicy: FullReject, Durability: DurabilityNone})
		e.group(tp, "g", GroupConfig{})
		var accepted atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 200 {
					err := tp.PublishAsync(Message{Subject: string(tp.Name()), Data: make([]byte, 64)}, func(_ Position, err error) {
						if err != nil {
							t.Errorf("publish: %v", err)
						}
					})
					if err == nil {
						accepted.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		waitFor(t, "counters", func() bool { return tp.Info().Unsettled == accepted.Load() })
		msgs, bytes := tp.unsettled()
		if accepted.Load() > 100 || msgs > 100 || bytes > 100*64 {
			t.Fatalf("%d partitions: accepted %d, unsettled %d msgs %d bytes; limits 100 msgs, %d bytes",
				parts, accepted.Load(), msgs, bytes, 100*64)
		}
		// Bytes alone: 2.4x over before.
		tb := e.topic(TopicName(fmt.Sprintf("b%d", parts)), TopicConfig{Partitions: parts, MaxUnsettledBytes: 10000,
			FullPolicy: FullReject, Durability: DurabilityNone})
		e.group(tb, "g", GroupConfig{})
		for range 400 {
			_ = tb.PublishAsync(Message{Subject: string(tb.Name()), Data: make([]byte, 700)}, func(Position, error) {})
		}
		waitFor(t, "stats", func() bool {
			tb.resMu.Lock()
			defer tb.resMu.Unlock()
			_, b := tb.unsettled()
			return b > 0 && tb.resMsgs == 0
		})
		if _, b := tb.unsettled(); b > 10000 {
			t.Fatalf("%d partitions: %d unsettled bytes, limit 10000", parts, b)
		}
	}
}

// TestBlockedPublishTimesOut: full_policy block used to hold a publish
// (and its confirm) for ever; it now waits at most block_timeout_ms and
// fails with ErrTopicFull.
func TestBlockedPublishTimesOut(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{MaxUnsettledMsgs: 1, BlockTimeoutMs: 100})
	e.group(tp, "g", GroupConfig{})
	e.publish(tp, "a")
	start := time.Now()
	_, err := tp.Publish(context.Background(), Message{Subject: "q", Data: []byte("b")})
	if !errors.Is(err, ErrTopicFull) {
		t.Fatalf("blocked publish: %v, want ErrTopicFull", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("gave up after %s, before block_timeout_ms 100", d)
	}
	if got := tp.Config().BlockTimeoutMs; got != 100 {
		t.Fatalf("block_timeout_ms %d", got)
	}
	if tp2 := e.topic("d", TopicConfig{}); tp2.Config().BlockTimeoutMs != DefaultBlockTimeoutMs {
		t.Fatalf("default block_timeout_ms %d", tp2.Config().BlockTimeoutMs)
	}
	if _, err := e.b.CreateTopic("bad", TopicConfig{BlockTimeoutMs: -1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative block_timeout_ms: %v", err)
	}
}
