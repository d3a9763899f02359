package fibril_test

import (
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

// TestOrderedByKey: a group created with Ordered "key" hands out one
// message per key (WithKey) at a time while keys run in parallel; a
// NACKed one comes back before the next of its key.
func TestOrderedByKey(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := topicName(t)
	if _, err := c.CreateTopic(ctx, topic, fibril.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	gi, err := c.CreateGroup(ctx, topic, "bykey", fibril.GroupConfig{Ordered: "key"})
	if err != nil || gi.Config.Ordered != "key" {
		t.Fatalf("create: %+v %v", gi, err)
	}
	for _, m := range [][2]string{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}} {
		if _, err := c.Publish(ctx, topic, []byte(m[1]), fibril.WithKey(m[0])); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := c.Fetch(ctx, topic, "bykey", 10, 5*time.Second)
	if err != nil || len(ms) != 2 || string(ms[0].Data) != "a1" || string(ms[1].Data) != "b1" {
		t.Fatalf("first fetch: %v %v, want a1 b1", ms, err)
	}
	if err := ms[0].Nack(ctx, 0); err != nil {
		t.Fatal(err)
	}
	ms, err = c.Fetch(ctx, topic, "bykey", 10, 5*time.Second)
	if err != nil || len(ms) != 1 || string(ms[0].Data) != "a1" || ms[0].DeliveryCount() != 2 {
		t.Fatalf("after the NACK: %v %v, want a1 again", ms, err)
	}
	if err := ms[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	ms, err = c.Fetch(ctx, topic, "bykey", 10, 5*time.Second)
	if err != nil || len(ms) != 1 || string(ms[0].Data) != "a2" {
		t.Fatalf("after the ack: %v %v, want a2", ms, err)
	}
}
