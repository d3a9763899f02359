package fibril_test

import (
	"context"
	"errors"
	"sync"
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
	if _, err := c.CreateGroup(ctx, topic, "g", fibril.GroupConfig{LeaseMillis: 300}); err != nil {
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
