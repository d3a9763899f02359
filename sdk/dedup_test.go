package fibril_test

import (
	"testing"

	fibril "github.com/fibrilmq/fibril/sdk"
)

// TestPublishDuplicate: a publish repeating a message id within the
// topic's duplicate window is confirmed with the first one's position,
// Duplicate set, and stored once; another id is stored.
func TestPublishDuplicate(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := topicName(t)
	if _, err := c.CreateTopic(ctx, topic, fibril.TopicConfig{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	first, err := c.Publish(ctx, topic, []byte("one"), fibril.WithMsgID("order-7"))
	if err != nil || first.Duplicate || !first.Stored {
		t.Fatalf("first publish: %+v, %v", first, err)
	}
	again, err := c.Publish(ctx, topic, []byte("one, retried"), fibril.WithMsgID("order-7"))
	if err != nil || !again.Duplicate || again.Partition != first.Partition || again.Seq != first.Seq {
		t.Fatalf("retry: %+v, %v; want a duplicate of %v", again, err, first)
	}
	if again.String() != first.String()+" duplicate" {
		t.Fatalf("String() = %q", again.String())
	}
	other, err := c.Publish(ctx, topic, []byte("two"), fibril.WithMsgID("order-8"))
	if err != nil || other.Duplicate {
		t.Fatalf("other id: %+v, %v", other, err)
	}
	info, err := c.Topic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if info.Msgs != 2 {
		t.Fatalf("%d messages stored, want 2", info.Msgs)
	}
}
