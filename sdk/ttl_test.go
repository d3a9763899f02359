package fibril_test

import (
	"errors"
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

// TestPublishTTL: WithTTL sets a message's TTL on a topic with
// AllowMsgTTL: past it the group (OnExpiry dead_letter) hands it to its
// dead-letter topic, Fibril-Reason expired; on a topic without
// AllowMsgTTL the publish fails with ErrInvalidHeader.
func TestPublishTTL(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := topicName(t)
	if _, err := c.CreateTopic(ctx, topic, fibril.TopicConfig{AllowMsgTTL: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateGroup(ctx, topic, "g", fibril.GroupConfig{OnExpiry: "dead_letter"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, topic, []byte("short"), fibril.WithTTL(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, topic, []byte("long"), fibril.WithTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // past the short one's TTL
	ms, err := c.Fetch(ctx, topic, "g", 10, time.Second)
	if err != nil || len(ms) != 1 || string(ms[0].Data) != "long" {
		t.Fatalf("fetch: %v %v, want only long", ms, err)
	}
	dead, err := c.Fetch(ctx, "$DLQ."+topic+".g", "ops", 10, 5*time.Second)
	if err != nil || len(dead) != 1 || string(dead[0].Data) != "short" || dead[0].Header.Get(fibril.HeaderReason) != "expired" {
		t.Fatalf("dead letters: %v %v", dead, err)
	}
	plain := topicName(t) + "-plain"
	if _, err := c.CreateTopic(ctx, plain, fibril.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, plain, []byte("x"), fibril.WithTTL(time.Minute)); !errors.Is(err, fibril.ErrInvalidHeader) {
		t.Fatalf("TTL on a topic without AllowMsgTTL: %v, want ErrInvalidHeader", err)
	}
}
