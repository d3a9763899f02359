package fibril_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

// publishN publishes n messages "0".."n-1" to topic and waits for every
// confirm.
func publishN(t *testing.T, c *fibril.Conn, topic string, n int) {
	t.Helper()
	out := make([]fibril.OutMsg, n)
	for i := range out {
		out[i] = fibril.OutMsg{Subject: topic, Data: fmt.Append(nil, i)}
	}
	if _, err := c.PublishBatch(testCtx(t), out); err != nil {
		t.Fatal(err)
	}
}

func groupInfo(t *testing.T, c *fibril.Conn, topic, group string) *fibril.GroupInfo {
	t.Helper()
	gi, err := c.Group(testCtx(t), topic, group)
	if err != nil {
		t.Fatal(err)
	}
	return gi
}

// TestFetcherPrefetchesAndAcksPipelined: while the caller holds a batch,
// the Fetcher has its prefetched POLLs answered (the server shows them in
// flight); every message arrives once, in order, and pipelined acks settle
// them all.
func TestFetcherPrefetchesAndAcksPipelined(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	admin := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	const n, batch = 50, 10
	publishN(t, c, topic, n)
	f, err := c.NewFetcher(topic, "g", batch, 0, fibril.WithPrefetch(2))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	first, err := f.Next(ctx)
	if err != nil || len(first) != batch {
		t.Fatalf("first batch: %d messages, err %v", len(first), err)
	}
	waitFor(t, 10*time.Second, "two prefetched batches in flight", func() bool {
		return groupInfo(t, admin, topic, "g").Inflight == 3*batch
	})
	var acks []*fibril.AckFuture
	got := first
	acks = append(acks, c.AckAllAsync(first...))
	for len(got) < n {
		msgs, err := f.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			t.Fatalf("empty batch after %d of %d", len(got), n)
		}
		got = append(got, msgs...)
		acks = append(acks, c.AckAllAsync(msgs...))
	}
	for i, m := range got {
		if string(m.Data) != fmt.Sprint(i) || m.DeliveryCount() != 1 {
			t.Fatalf("message %d is %q (delivery %d)", i, m.Data, m.DeliveryCount())
		}
	}
	for i, a := range acks {
		if err := a.Wait(ctx); err != nil {
			t.Fatalf("ack of batch %d: %v", i, err)
		}
	}
	if gi := groupInfo(t, admin, topic, "g"); gi.Inflight != 0 || gi.Pending != 0 {
		t.Fatalf("after the acks: %d in flight, %d pending", gi.Inflight, gi.Pending)
	}
}

// TestFetcherCloseHandsBack: Close gives prefetched deliveries back at once
// (the lease is 30 s, so only the hand-back makes them ready this soon);
// the batch returned by Next stays the caller's.
func TestFetcherCloseHandsBack(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	other := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	publishN(t, c, topic, 15)
	f, err := c.NewFetcher(topic, "g", 5, 0, fibril.WithPrefetch(2))
	if err != nil {
		t.Fatal(err)
	}
	held, err := f.Next(ctx)
	if err != nil || len(held) != 5 {
		t.Fatalf("first batch: %d messages, err %v", len(held), err)
	}
	waitFor(t, 10*time.Second, "prefetched batches in flight", func() bool {
		return groupInfo(t, other, topic, "g").Inflight == 15
	})
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Next(ctx); !errors.Is(err, fibril.ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	var back []*fibril.Msg
	deadline := time.Now().Add(10 * time.Second)
	for len(back) < 10 && time.Now().Before(deadline) {
		msgs, err := other.Fetch(ctx, topic, "g", 10, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		back = append(back, msgs...)
	}
	if len(back) != 10 {
		t.Fatalf("%d prefetched deliveries handed back, want 10", len(back))
	}
	for _, m := range back {
		if m.DeliveryCount() != 2 {
			t.Fatalf("handed back %q with delivery count %d, want 2", m.Data, m.DeliveryCount())
		}
	}
	if err := c.AckAll(ctx, held...); err != nil {
		t.Fatalf("the held batch is still the caller's: %v", err)
	}
}

// TestFetcherNextCancelKeepsBatch: a Next whose ctx ends leaves its POLL
// outstanding, and the next call returns what that POLL brings.
func TestFetcherNextCancelKeepsBatch(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	pub := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	f, err := c.NewFetcher(topic, "g", 10, 10*time.Second, fibril.WithPrefetch(0))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	msgs, err := f.Next(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || len(msgs) != 0 {
		t.Fatalf("Next on an empty topic: %d messages, err %v", len(msgs), err)
	}
	if _, err := pub.Publish(ctx, topic, []byte("late")); err != nil {
		t.Fatal(err)
	}
	msgs, err = f.Next(ctx)
	if err != nil || len(msgs) != 1 || string(msgs[0].Data) != "late" || msgs[0].DeliveryCount() != 1 {
		t.Fatalf("after the cancelled Next: %d messages, err %v", len(msgs), err)
	}
	if err := msgs[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAckAsyncDoesNotWait: an ACK written behind a waiting POLL returns at
// once; its future completes when the POLL is answered. Failures (a stale
// handle, no handle) come through the future.
func TestAckAsyncDoesNotWait(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	pub := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	idle := mustTopic(t, c, topicName(t)+"_idle", fibril.TopicConfig{})
	publishN(t, c, topic, 2)
	msgs, err := c.Fetch(ctx, topic, "g", 2, time.Second)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("fetch: %d messages, err %v", len(msgs), err)
	}
	// a POLL that waits up to 10 s holds back every later answer on c
	f, err := c.NewFetcher(idle, "g", 1, 10*time.Second, fibril.WithPrefetch(0))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	_, _ = f.Next(short)
	cancel()
	a := msgs[0].AckAsync()
	if err := a.Err(); !errors.Is(err, fibril.ErrAckPending) {
		t.Fatalf("ack behind a waiting POLL: %v, want ErrAckPending", err)
	}
	if _, err := pub.Publish(ctx, idle, []byte("wake")); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Next(ctx); err != nil || len(got) != 1 {
		t.Fatalf("woken POLL: %d messages, err %v", len(got), err)
	}
	if err := a.Wait(ctx); err != nil {
		t.Fatal(err)
	}

	// a superseded delivery: nack it, then ack the old handle
	if err := msgs[1].Nack(ctx, 0); err != nil {
		t.Fatal(err)
	}
	again := fetchOne(t, c, topic, "g", time.Second)
	if err := msgs[1].AckAsync().Wait(ctx); !errors.Is(err, fibril.ErrStaleHandle) {
		t.Fatalf("async ack of a superseded delivery: %v, want ErrStaleHandle", err)
	}
	if err := c.AckAllAsync(again).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := (&fibril.Msg{}).AckAsync().Wait(ctx); !errors.Is(err, fibril.ErrNoHandle) {
		t.Fatalf("ack without a handle: %v, want ErrNoHandle", err)
	}
	if err := c.AckAllAsync().Wait(ctx); err != nil {
		t.Fatalf("ack of nothing: %v", err)
	}
	if gi := groupInfo(t, pub, topic, "g"); gi.Inflight != 0 || gi.Pending != 0 {
		t.Fatalf("after the acks: %d in flight, %d pending", gi.Inflight, gi.Pending)
	}
}

// TestAckAllAsyncAfterClose: a closed Conn fails the future, it does not
// hang.
func TestAckAllAsyncAfterClose(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	publishN(t, c, topic, 1)
	m := fetchOne(t, c, topic, "g", time.Second)
	c.Close()
	if err := m.AckAsync().Wait(ctx); !errors.Is(err, fibril.ErrClosed) {
		t.Fatalf("ack on a closed Conn: %v, want ErrClosed", err)
	}
}

func TestNewFetcherValidates(t *testing.T) {
	c := connect(t, "")
	for _, tc := range []struct {
		name         string
		topic, group string
		max          int
		wait         time.Duration
		prefetch     int
	}{
		{"empty topic", "", "g", 1, 0, 1},
		{"space in group", "t", "g g", 1, 0, 1},
		{"max 0", "t", "g", 0, 0, 1},
		{"negative wait", "t", "g", 1, -time.Second, 1},
		{"negative prefetch", "t", "g", 1, 0, -1},
		{"prefetch too large", "t", "g", 1, 0, 17},
	} {
		if _, err := c.NewFetcher(tc.topic, tc.group, tc.max, tc.wait, fibril.WithPrefetch(tc.prefetch)); !errors.Is(err, fibril.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, err)
		}
	}
}

// TestFetcherAcrossReconnect: POLLs on the wire when the server dies fail
// with ErrConnectionLost, and the same Fetcher goes on after the reconnect
// until every message is acked.
func TestFetcherAcrossReconnect(t *testing.T) {
	srv := startServer(t)
	ctx := testCtx(t)
	c := connect(t, "fibril://"+srv.Addr)
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{Durability: "sync"})
	if _, err := c.CreateGroup(ctx, topic, "g", fibril.GroupConfig{LeaseMs: 1000}); err != nil {
		t.Fatal(err)
	}
	publishN(t, c, topic, 3)
	// short waits: an Ack is answered after the POLLs written before it
	f, err := c.NewFetcher(topic, "g", 1, 50*time.Millisecond, fibril.WithPrefetch(2))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if msgs, err := f.Next(ctx); err != nil || len(msgs) != 1 {
		t.Fatalf("first batch: %d messages, err %v", len(msgs), err)
	}
	if err := srv.Restart(ctx, true); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	lost := false
	for len(acked) < 3 {
		msgs, err := f.Next(ctx)
		switch {
		case errors.Is(err, fibril.ErrConnectionLost):
			lost = true
			continue
		case err != nil:
			t.Fatalf("after %d acked: %v", len(acked), err)
		}
		for _, m := range msgs {
			if err := m.Ack(ctx); err != nil && !errors.Is(err, fibril.ErrStaleHandle) {
				t.Fatal(err)
			} else if err == nil {
				acked[string(m.Data)] = true
			}
		}
	}
	if !lost {
		t.Fatal("no POLL failed with ErrConnectionLost: the restart was not seen")
	}
	if c.Reconnects() < 1 {
		t.Fatal("no reconnect")
	}
}
