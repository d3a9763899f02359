package fibril_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

// TestConsumeAckFailureReachesErrorHandler: Consume's acks are pipelined,
// yet a failed one still reaches the error handler, and every ack is
// answered before Consume returns. The first delivery's handler runs until
// its lease expired and the message was delivered again, so its ack is
// stale (the redelivery is acked only after that, as an ack of an offset
// already acked would be +OK).
func TestConsumeAckFailureReachesErrorHandler(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	if _, err := c.CreateGroup(ctx, topic, "g", fibril.GroupConfig{LeaseMs: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, topic, []byte("x")); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	redelivered := make(chan struct{})
	var once sync.Once
	staleSeen := make(chan struct{}) // the redelivery is acked after the stale ack failed
	errs := make(chan error, 4)
	done := make(chan error, 1)
	go func() {
		done <- c.Consume(cctx, topic, "g", func(ctx context.Context, m *fibril.Msg) error {
			if m.DeliveryCount() == 1 {
				select { // outlive the lease
				case <-redelivered:
				case <-ctx.Done():
				}
				return nil
			}
			once.Do(func() { close(redelivered) }) // a slow run may deliver a third time
			select {
			case <-staleSeen:
			case <-ctx.Done():
			}
			return nil
		}, fibril.WithConcurrency(2), fibril.WithMaxInFlight(2), fibril.WithErrorHandler(func(err error) {
			select {
			case errs <- err:
			default:
			}
		}))
	}()
	select {
	case err := <-errs:
		if !errors.Is(err, fibril.ErrStaleHandle) {
			t.Fatalf("error handler got %v, want ErrStaleHandle", err)
		}
		close(staleSeen)
	case err := <-done:
		t.Fatalf("Consume returned early: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the stale ack never reached the error handler")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if gi := groupInfo(t, c, topic, "g"); gi.Inflight != 0 || gi.Pending != 0 {
		t.Fatalf("after Consume: %d in flight, %d pending (the redelivery's ack must be answered)", gi.Inflight, gi.Pending)
	}
}

// TestConsumeBatchedAckReportsEachFailure: Consume acks the messages it
// handled in one ACK line when more are waiting; when that line fails, each
// stale delivery is still reported once, with its own error. The first
// handler holds the worker until the three leases expired and all three
// messages were delivered again; the handler fails those redeliveries
// (nacked with a long delay, so they stay unsettled and the stale handles
// stay stale), and the three first deliveries' acks fail.
func TestConsumeBatchedAckReportsEachFailure(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	admin := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	if _, err := c.CreateGroup(ctx, topic, "g", fibril.GroupConfig{LeaseMs: 1000}); err != nil {
		t.Fatal(err)
	}
	publishN(t, c, topic, 3)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var stale, other []error
	nacked := 0
	done := make(chan error, 1)
	go func() {
		first := true
		done <- c.Consume(cctx, topic, "g", func(ctx context.Context, m *fibril.Msg) error {
			if first {
				first = false
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
					if gi, err := admin.Group(ctx, topic, "g"); err == nil && gi.Redelivered >= 3 {
						break
					}
				}
			}
			if m.DeliveryCount() > 1 {
				mu.Lock()
				nacked++
				mu.Unlock()
				return errors.New("not now") // nacked for an hour
			}
			return nil
		}, fibril.WithMaxInFlight(10), fibril.WithNackDelay(time.Hour), fibril.WithErrorHandler(func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if errors.Is(err, fibril.ErrStaleHandle) {
				stale = append(stale, err)
			} else {
				other = append(other, err)
			}
		}))
	}()
	waitFor(t, 10*time.Second, "three stale acks reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(stale) >= 3 && nacked == 3
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(stale) != 3 || len(other) != 0 {
		t.Fatalf("errors reported: %d stale (want 3), others %v", len(stale), other)
	}
	if gi := groupInfo(t, c, topic, "g"); gi.Inflight != 0 || gi.Pending != 3 {
		t.Fatalf("after Consume: %d in flight, %d pending (want the 3 nacked)", gi.Inflight, gi.Pending)
	}
}

// TestConsumeAcksBeforeTheNextSlowHandler: a message's ack goes out when
// its handler returns, not after the next handler (it used to wait in the
// worker's batch while the next message was handled, so a handler slower
// than the lease let the previous message's lease run out).
func TestConsumeAcksBeforeTheNextSlowHandler(t *testing.T) {
	c := connect(t, "")
	admin := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{Partitions: 1})
	if _, err := c.CreateGroup(testCtx(t), topic, "g", fibril.GroupConfig{LeaseMs: 600_000}); err != nil {
		t.Fatal(err)
	}
	publishN(t, c, topic, 2)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	var acked atomic.Bool
	n := 0
	err := c.Consume(ctx, topic, "g", func(ctx context.Context, m *fibril.Msg) error {
		if n++; n == 2 { // the slow one: wait until the first is acked on the server
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				gi, err := admin.Group(ctx, topic, "g")
				if err == nil && gi.Pending == 0 && gi.Inflight == 1 {
					acked.Store(true)
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
		}
		return nil
	}, fibril.WithMaxInFlight(2))
	if err != nil {
		t.Fatal(err)
	}
	if !acked.Load() {
		t.Fatal("the first message's ack did not reach the server while the second was handled")
	}
}
