package fibril_test

import (
	"errors"
	"testing"

	fibril "github.com/fibrilmq/fibril/sdk"
)

// TestTopicCompression: TopicConfig.Compression reaches the server (SPEC.md
// 10.1), TopicInfo shows it, messages of a compressed topic read back as
// published, and another codec for the same topic or an unknown one is
// refused with a typed error.
func TestTopicCompression(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := topicName(t)
	ti, err := c.CreateTopic(ctx, topic, fibril.TopicConfig{Compression: "s2"})
	if err != nil {
		t.Fatal(err)
	}
	if ti.Config.Compression != "s2" {
		t.Fatalf("CreateTopic: compression %q, want s2", ti.Config.Compression)
	}
	if ti, err = c.Topic(ctx, topic); err != nil || ti.Config.Compression != "s2" {
		t.Fatalf("Topic: %+v, %v", ti, err)
	}
	if _, err := c.CreateTopic(ctx, topic, fibril.TopicConfig{Compression: "s2"}); err != nil {
		t.Fatalf("same configuration again: %v", err)
	}
	if _, err := c.CreateTopic(ctx, topic, fibril.TopicConfig{Compression: "zstd"}); !errors.Is(err, fibril.ErrTopicExists) {
		t.Fatalf("another codec: %v, want ErrTopicExists", err)
	}
	if _, err := c.CreateTopic(ctx, topicName(t)+"-bad", fibril.TopicConfig{Compression: "lz4"}); !errors.Is(err, fibril.ErrInvalidConfig) {
		t.Fatalf("unknown codec: %v, want ErrInvalidConfig", err)
	}

	plain := topicName(t) + "-plain"
	if ti, err := c.CreateTopic(ctx, plain, fibril.TopicConfig{}); err != nil || ti.Config.Compression != "none" {
		t.Fatalf("default: %+v, %v", ti, err)
	}

	if _, err := c.Publish(ctx, topic, []byte(`{"order":1,"status":"pending"}`)); err != nil {
		t.Fatal(err)
	}
	m := fetchOne(t, c, topic, "g", 0)
	if string(m.Data) != `{"order":1,"status":"pending"}` {
		t.Fatalf("read back %q", m.Data)
	}
	if err := m.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}
