package broker

import (
	"errors"
	"fmt"
	"testing"
)

// TestTopicTableIncremental: topics added one at a time (across several
// merges of recent into base) and removed are found by name, id and
// subject exactly as in a table built at once, and overlaps are refused
// against topics in base and in recent alike.
func TestTopicTableIncremental(t *testing.T) {
	tt := newTopicTable(nil)
	var all []*Topic
	for i := 1; i <= 300; i++ {
		subj := fmt.Sprintf("s.%d", i)
		if i%50 == 0 {
			subj = fmt.Sprintf("w.%d.*", i)
		}
		tp := &Topic{id: TopicID(i), name: TopicName(fmt.Sprintf("t%d", i)), cfg: TopicConfig{Subjects: []string{subj}}}
		if err := tt.overlaps(tp.name, tp.cfg.Subjects); err != nil {
			t.Fatalf("topic %d: %v", i, err)
		}
		tt = tt.with(tp)
		all = append(all, tp)
	}
	check := func(tt *topicTable, gone *Topic) {
		t.Helper()
		for _, tp := range all {
			want := tp
			if tp == gone {
				want = nil
			}
			subj := tp.cfg.Subjects[0]
			if tp.id%50 == 0 {
				subj = fmt.Sprintf("w.%d.x", tp.id)
			}
			if tt.topic(tp.name) != want || tt.topicByID(tp.id) != want || tt.route(subj) != want {
				t.Fatalf("topic %s: by name %v, by id %v, route %v; want %v", tp.name, tt.topic(tp.name), tt.topicByID(tp.id), tt.route(subj), want)
			}
		}
	}
	check(tt, nil)
	if len(tt.recent.byID) == 0 || len(tt.base.byID) == 0 {
		t.Fatalf("base %d, recent %d: the test covers neither a merge nor recent", len(tt.base.byID), len(tt.recent.byID))
	}
	for _, tc := range []struct{ name, subj string }{
		{"exact in base", "s.1"}, {"exact in recent", "s.299"}, {"under a wildcard", "w.50.y"}, {"wildcard over an exact", "s.*"},
	} {
		if err := tt.overlaps("new", []string{tc.subj}); !errors.Is(err, ErrOverlap) {
			t.Errorf("%s: overlaps(%q) = %v, want ErrOverlap", tc.name, tc.subj, err)
		}
	}
	if err := tt.overlaps("new", []string{"s.301"}); err != nil {
		t.Errorf("overlaps(s.301) = %v", err)
	}
	check(tt.without(all[298]), all[298])
	check(tt.without(all[0]), all[0])
}
