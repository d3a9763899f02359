package broker

import (
	"strings"
	"testing"
)

// TestPollAsyncBytesLimitsTheAnswer: a poll stops adding messages once its
// answer holds maxBytes, across partitions too, and still delivers one
// message bigger than the limit (a regression guard for POLL answers of
// 1024 big messages being built in one piece: up to 1 GiB at the default
// max payload).
func TestPollAsyncBytesLimitsTheAnswer(t *testing.T) {
	for _, parts := range []int{1, 3} {
		e := newEnv(t, nil)
		tp := e.topic("q", TopicConfig{Partitions: parts})
		g := e.group(tp, "w", GroupConfig{})
		body := strings.Repeat("x", 1000)
		for i := 0; i < 30; i++ {
			e.publish(tp, body)
		}
		poll := func(max int, maxBytes int64) []Delivery { return e.pollNowBytes(g, max, maxBytes, 1) }
		// 1000-byte bodies plus the subject: the fifth one crosses 4500
		if ds := poll(100, 4500); len(ds) != 5 {
			t.Errorf("partitions=%d: poll(max 100, 4500 bytes) got %d messages, want 5", parts, len(ds))
		}
		if ds := poll(100, 10); len(ds) != 1 {
			t.Errorf("partitions=%d: poll(max 100, 10 bytes) got %d, want the one that does not fit", parts, len(ds))
		}
		if ds := poll(100, 0); len(ds) != 24 {
			t.Errorf("partitions=%d: poll(max 100, no byte limit) got %d, want the 24 left", parts, len(ds))
		}
		if err := g.PollAsyncBytes(1, -1, 0, 1, func([]Delivery, error) {}); err == nil {
			t.Errorf("negative maxBytes accepted")
		}
	}
}
