package fibril_test

import (
	"errors"
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

// TestAckAsyncBurstEachOwnOutcome: a burst of AckAsync calls shares ACK
// lines; one stale delivery among them fails its own future only, and every
// other delivery of the burst is acked.
func TestAckAsyncBurstEachOwnOutcome(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	const n = 50
	publishN(t, c, topic, n)
	msgs, err := c.Fetch(ctx, topic, "g", n, time.Second)
	if err != nil || len(msgs) != n {
		t.Fatalf("fetch: %d messages, err %v", len(msgs), err)
	}
	// msgs[0] is superseded by a redelivery that stays unsettled during the
	// burst (acking it in the same line would make the stale ack +OK)
	if err := msgs[0].Nack(ctx, 0); err != nil {
		t.Fatal(err)
	}
	again := fetchOne(t, c, topic, "g", time.Second)
	futs := make([]*fibril.AckFuture, n)
	for i, m := range msgs {
		futs[i] = m.AckAsync()
	}
	for i, f := range futs {
		err := f.Wait(ctx)
		switch {
		case i == 0 && !errors.Is(err, fibril.ErrStaleHandle):
			t.Fatalf("stale delivery: %v, want ErrStaleHandle", err)
		case i > 0 && err != nil:
			t.Fatalf("delivery %d of the burst: %v", i, err)
		}
	}
	if err := again.AckAsync().Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if gi := groupInfo(t, c, topic, "g"); gi.Inflight != 0 || gi.Pending != 0 {
		t.Fatalf("after the burst: %d in flight, %d pending", gi.Inflight, gi.Pending)
	}
}

// TestAckAsyncKeepsCommandOrder: a queued ack is written before any command
// issued after it, so Flush (PING) returns only after the ack is answered.
func TestAckAsyncKeepsCommandOrder(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	publishN(t, c, topic, 20)
	msgs, err := c.Fetch(ctx, topic, "g", 20, time.Second)
	if err != nil || len(msgs) != 20 {
		t.Fatalf("fetch: %d messages, err %v", len(msgs), err)
	}
	for _, m := range msgs {
		a := m.AckAsync()
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-a.Done():
			if err := a.Err(); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("Flush returned before the ack issued ahead of it was answered")
		}
	}
}
