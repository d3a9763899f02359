package broker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestGroupStartSeq: start "seq" begins each partition at start_seq, and
// the start survives a restart (the group is polled only after it).
func TestGroupStartSeq(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	for _, s := range []string{"a", "b", "c"} {
		e.publish(tp, s)
	}
	e.group(tp, "g", GroupConfig{Start: StartSeq, StartSeq: 2})
	e.group(tp, "end", GroupConfig{Start: StartSeq, StartSeq: 4}) // the next offset: nothing yet
	e.restart()
	tp, _ = e.b.Topic("q")
	g, ok := tp.FindGroup("g")
	if !ok {
		t.Fatal("group g lost by the restart")
	}
	if cfg := g.Config(); cfg.Start != StartSeq || cfg.StartSeq != 2 {
		t.Fatalf("config after restart %+v", cfg)
	}
	if got := datas(e.poll(g, 10)); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("start_seq 2 got %v, want [b c]", got)
	}
	end, _ := tp.FindGroup("end")
	if got := e.pollNow(end, 10, 1); len(got) != 0 {
		t.Fatalf("start_seq 4 got %v before anything was published there", datas(got))
	}
	e.publish(tp, "d")
	if got := datas(e.poll(end, 10)); !slices.Equal(got, []string{"d"}) {
		t.Fatalf("start_seq 4 got %v, want [d]", got)
	}
}

// TestGroupStartSeqBelowRetained: a start_seq below the oldest retained
// message begins at that message.
func TestGroupStartSeqBelowRetained(t *testing.T) {
	clk := newFakeClock()
	e := newMemEnv(t, clk)
	tp := e.topic("q", TopicConfig{Retention: RetentionLimits, MaxMsgs: 2})
	e.group(tp, "other", GroupConfig{})
	for _, s := range []string{"a", "b", "c"} {
		e.publish(tp, s)
	}
	clk.Advance(time.Second) // let a retention pass run
	waitFor(t, "retention to drop a", func() bool { return tp.Info().Messages == 2 })
	g := e.group(tp, "g", GroupConfig{Start: StartSeq, StartSeq: 1})
	if got := datas(e.poll(g, 10)); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("got %v, want [b c]", got)
	}
}

// TestGroupStartTime: start "time" begins at the first message stored at or
// after start_time (the expectation is computed from the stored
// timestamps), and survives a restart.
func TestGroupStartTime(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	for _, s := range []string{"a", "b", "c", "d", "e"} {
		e.publish(tp, s)
	}
	stored, _, err := tp.Browse(context.Background(), 0, 1, 10)
	if err != nil || len(stored) != 5 {
		t.Fatalf("browse: %d, %v", len(stored), err)
	}
	for i, m := range stored {
		at := m.Time
		var want []string
		for _, s := range stored {
			if !s.Time.Before(at) {
				want = append(want, string(s.Data))
			}
		}
		name := GroupName("g" + string(rune('0'+i)))
		e.group(tp, name, GroupConfig{Start: StartTime, StartTime: at.UTC().Format(time.RFC3339Nano)})
		e.restart()
		tp, _ = e.b.Topic("q")
		g, _ := tp.FindGroup(name)
		if got := datas(e.poll(g, 10)); !slices.Equal(got, want) {
			t.Fatalf("start_time of %s: got %v, want %v", m.Data, got, want)
		}
	}
	past := e.group(tp, "past", GroupConfig{Start: StartTime, StartTime: "2000-01-01T00:00:00Z"})
	if got := datas(e.poll(past, 10)); len(got) != 5 {
		t.Fatalf("a start_time before everything got %v", got)
	}
	future := e.group(tp, "future", GroupConfig{Start: StartTime, StartTime: "2200-01-01T00:00:00+01:00"})
	if got := e.pollNow(future, 10, 1); len(got) != 0 {
		t.Fatalf("a start_time after everything got %v", datas(got))
	}
	e.publish(tp, "f")
	if got := datas(e.poll(future, 10)); !slices.Equal(got, []string{"f"}) {
		t.Fatalf("a start_time after everything then got %v, want [f]", got)
	}
}

// TestGroupStartInvalid: a start field missing, out of range, malformed or
// without its start value is ErrInvalid, and no group is left behind.
func TestGroupStartInvalid(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{Partitions: 2})
	e.publish(tp, "a") // one partition has offset 1, the other nothing
	for _, cfg := range []GroupConfig{
		{Start: StartSeq},
		{Start: StartSeq, StartSeq: -1},
		{Start: StartSeq, StartSeq: 3}, // beyond every partition's next offset
		{Start: StartSeq, StartSeq: 2}, // beyond the empty partition's next offset
		{Start: StartEarliest, StartSeq: 1},
		{StartSeq: 1},
		{Start: StartTime},
		{Start: StartTime, StartTime: "yesterday"},
		{Start: StartTime, StartTime: "2026-12-03 14:00:00"},
		{Start: StartTime, StartTime: "9999-01-01T00:00:00Z"},
		{Start: StartNew, StartTime: "2026-12-03T14:00:00Z"},
		{Start: StartSeq, StartSeq: 1, StartTime: "2026-12-03T14:00:00Z"},
		{Start: "latest"},
	} {
		if _, err := tp.Group("g", cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: err %v, want ErrInvalid", cfg, err)
		}
	}
	if gs := tp.Groups(); len(gs) != 0 {
		t.Fatalf("groups left behind: %d", len(gs))
	}
	g := e.group(tp, "g", GroupConfig{Start: StartSeq, StartSeq: 1})
	if got := datas(e.poll(g, 10)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("start_seq 1 got %v", got)
	}
}
