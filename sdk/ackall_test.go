package fibril_test

import (
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

// TestAckAllSplitsAtMaxControlLine acks more handles at once than fit on one
// control line (INFO max_control_line): AckAll must split them into several
// ACK commands instead of sending a line the server refuses (fatally).
func TestAckAllSplitsAtMaxControlLine(t *testing.T) {
	c := connect(t, "")
	ctx := testCtx(t)
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	group := "g"
	const n = 600 // handles are short (about 14 bytes): 600 need ~9 KB
	for i := 0; i < n; i++ {
		if _, err := c.Publish(ctx, topic, []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []*fibril.Msg
	for len(msgs) < n {
		got, err := c.Fetch(ctx, topic, group, n-len(msgs), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatalf("fetched %d of %d", len(msgs), n)
		}
		msgs = append(msgs, got...)
	}
	size := len("ACK")
	for _, m := range msgs {
		size += 1 + len(m.Handle())
	}
	if limit := c.Info().MaxControlLine; size <= max(limit, 4096) {
		t.Fatalf("one ACK line would be %d bytes, not over the %d limit: the test proves nothing", size, limit)
	}
	if err := c.AckAll(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	// every delivery was acked, and the connection is still up
	left, err := c.Fetch(ctx, topic, group, n, 0)
	if err != nil || len(left) != 0 {
		t.Fatalf("after AckAll: %d deliveries left, err %v", len(left), err)
	}
}
