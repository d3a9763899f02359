package fibril_test

import (
	"errors"
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

// TestPublishDelay: WithDelay and WithDeliverAt hold a message back on a
// topic with AllowMsgDelay (the one after it flows on); on a topic without
// it the publish fails with ErrInvalidHeader.
func TestPublishDelay(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := topicName(t)
	if _, err := c.CreateTopic(ctx, topic, fibril.TopicConfig{AllowMsgDelay: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, topic, []byte("in an hour"), fibril.WithDelay(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, topic, []byte("tomorrow"), fibril.WithDeliverAt(time.Now().Add(24*time.Hour))); err != nil {
		t.Fatal(err)
	}
	// Long enough to be still held back at the first Fetch on a loaded
	// machine (it was 50 ms, and "soon" was due by then: two messages).
	if _, err := c.Publish(ctx, topic, []byte("soon"), fibril.WithDelay(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, topic, []byte("now")); err != nil {
		t.Fatal(err)
	}
	ms, err := c.Fetch(ctx, topic, "g", 10, 0)
	if err != nil || len(ms) != 1 || string(ms[0].Data) != "now" {
		t.Fatalf("at once: %v %v, want only now", ms, err)
	}
	ms, err = c.Fetch(ctx, topic, "g", 10, 10*time.Second)
	if err != nil || len(ms) != 1 || string(ms[0].Data) != "soon" {
		t.Fatalf("once soon is due: %v %v", ms, err)
	}
	plain := topicName(t) + "-plain"
	if _, err := c.CreateTopic(ctx, plain, fibril.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, plain, []byte("x"), fibril.WithDelay(time.Minute)); !errors.Is(err, fibril.ErrInvalidHeader) {
		t.Fatalf("a delay on a topic without AllowMsgDelay: %v, want ErrInvalidHeader", err)
	}
}
