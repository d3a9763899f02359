package jsapi

import (
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/broker"
)

// TestSameTopicDuplicateWindow: a stream whose topic was made before
// duplicate_window_ms existed (so has the default window) still matches a
// request repeating its recorded window; any other difference does not.
func TestSameTopicDuplicateWindow(t *testing.T) {
	ms := func(v int64) *int64 { return &v }
	minute := StreamConfig{Name: "S", Duplicates: time.Minute}
	hour := StreamConfig{Name: "S", Duplicates: time.Hour}
	cases := []struct {
		name            string
		want, have      broker.TopicConfig
		recorded, asked StreamConfig
		same            bool
	}{
		{"equal", broker.TopicConfig{DuplicateWindowMs: ms(60000)}, broker.TopicConfig{DuplicateWindowMs: ms(60000)}, minute, minute, true},
		{"made before the window, recorded window asked", broker.TopicConfig{DuplicateWindowMs: ms(60000)}, broker.TopicConfig{DuplicateWindowMs: ms(120000)}, minute, minute, true},
		{"made before the window, another window asked", broker.TopicConfig{DuplicateWindowMs: ms(3600000)}, broker.TopicConfig{DuplicateWindowMs: ms(120000)}, minute, hour, false},
		{"another window on a topic that has its own", broker.TopicConfig{DuplicateWindowMs: ms(60000)}, broker.TopicConfig{DuplicateWindowMs: ms(3600000)}, hour, hour, false},
		{"another limit", broker.TopicConfig{MaxMsgs: 5, DuplicateWindowMs: ms(60000)}, broker.TopicConfig{DuplicateWindowMs: ms(120000)}, minute, minute, false},
	}
	for _, tc := range cases {
		if got := sameTopic(tc.want, tc.have, tc.recorded, tc.asked); got != tc.same {
			t.Errorf("%s: sameTopic = %v, want %v", tc.name, got, tc.same)
		}
	}
}
