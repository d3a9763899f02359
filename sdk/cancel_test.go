package fibril_test

// Cancellation with a backlog (issue 33, item 1): a consumer whose ctx ends
// stops after the message it is handling, hands the rest back, and
// Subscription.Stop honours its ctx.

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

// backlogTopic makes a one-partition topic with a group whose lease is long
// (so that only a hand-back makes a delivery available again soon) and n
// messages in it.
func backlogTopic(t *testing.T, c *fibril.Conn, n int) string {
	t.Helper()
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{Partitions: 1})
	if _, err := c.CreateGroup(testCtx(t), topic, "g", fibril.GroupConfig{LeaseMs: 600_000}); err != nil {
		t.Fatal(err)
	}
	publishN(t, c, topic, n)
	return topic
}

// handedBack waits until the group shows want messages pending again (handed
// back, not waiting for their lease) and nothing in flight.
func handedBack(t *testing.T, c *fibril.Conn, topic string, want uint64) {
	t.Helper()
	waitFor(t, 5*time.Second, "the backlog handed back", func() bool {
		gi := groupInfo(t, c, topic, "g")
		return gi.Pending == want && gi.Inflight == 0
	})
}

// TestConsumeCancelledWithBacklogStops: Consume cancelled by its handler
// with hundreds of deliveries queued returns after that message (it used to
// handle the whole queue first, and under steady traffic never stopped).
func TestConsumeCancelledWithBacklogStops(t *testing.T) {
	const total, stopAt = 500, 5
	c := connect(t, "")
	topic := backlogTopic(t, c, total)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	var handled atomic.Int64
	err := c.Consume(ctx, topic, "g", func(_ context.Context, m *fibril.Msg) error {
		if handled.Add(1) == stopAt {
			// let the server fill the client's queue before cancelling
			time.Sleep(100 * time.Millisecond)
			cancel()
		}
		return nil
	}, fibril.WithMaxInFlight(200))
	if err != nil {
		t.Fatal(err)
	}
	if n := handled.Load(); n != stopAt {
		t.Fatalf("handled %d messages after the cancel at message %d", n, stopAt)
	}
	handedBack(t, c, topic, total-stopAt)
}

// TestMessagesCancelledWithBacklogStops: the iterator ends at the next step
// after its ctx ends, queued deliveries notwithstanding.
func TestMessagesCancelledWithBacklogStops(t *testing.T) {
	const total, stopAt = 500, 5
	c := connect(t, "")
	topic := backlogTopic(t, c, total)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	n := 0
	for m, err := range c.Messages(ctx, topic, "g", fibril.WithMaxInFlight(200)) {
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Ack(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		if n++; n == stopAt {
			time.Sleep(100 * time.Millisecond)
			cancel()
		}
	}
	if n != stopAt {
		t.Fatalf("iterated %d messages after the cancel at message %d", n, stopAt)
	}
	handedBack(t, c, topic, total-stopAt)
}

// TestSubscriptionStopHonoursCtx: Stop returns when its ctx ends even if
// the server never answers the UNSUB (a frozen link); it used to wait a
// fixed 5 s whatever its ctx.
func TestSubscriptionStopHonoursCtx(t *testing.T) {
	admin := connect(t, "")
	topic := backlogTopic(t, admin, 0)
	addr, freeze := freezingProxy(t, serverURL[len("fibril://"):])
	c := connect(t, "fibril://"+addr, fibril.WithHeartbeat(time.Minute, 2))
	sub, err := c.Subscribe(testCtx(t), topic, "g")
	if err != nil {
		t.Fatal(err)
	}
	freeze()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	err = sub.Stop(ctx)
	if el := time.Since(t0); el > 2*time.Second {
		t.Fatalf("Stop took %v with a 200ms ctx", el)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want DeadlineExceeded", err)
	}
	if _, err := sub.Next(testCtx(t)); !errors.Is(err, fibril.ErrClosed) {
		t.Fatalf("Next after Stop = %v, want ErrClosed", err)
	}
}

// TestPlainNATSServerIsNotFibril: a server whose INFO has no "fibril" (a
// plain NATS server) is refused at once, as the Python and JS SDKs refuse it.
func TestPlainNATSServerIsNotFibril(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(`INFO {"server_id":"plain","version":"2.10.0","proto":1,"max_payload":1048576}` + "\r\n"))
			defer c.Close()
		}
	}()
	_, err = fibril.Connect(testCtx(t), "nats://"+ln.Addr().String())
	if !errors.Is(err, fibril.ErrProtocol) || !strings.Contains(err.Error(), "does not speak fibril") {
		t.Fatalf("Connect to a plain NATS server = %v", err)
	}
}
