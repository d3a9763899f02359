package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWorkqueueRetention(t *testing.T) {
	e := newMemEnv(t, nil) // the test store truncates exactly, not by segment
	tp := e.topic("q", TopicConfig{})
	for i := range 5 {
		e.publish(tp, fmt.Sprint(i))
	}
	// kept while no group exists
	barrier(t, e.b)
	barrier(t, e.b)
	if in := tp.Info(); in.Partitions[0].FirstSeq != 1 || in.Messages != 5 {
		t.Fatalf("before any group: %+v", in.Partitions)
	}
	g1 := e.group(tp, "a", GroupConfig{})
	g2 := e.group(tp, "b", GroupConfig{})
	for _, d := range e.poll(g1, 5) {
		if err := e.settle(d, Ack()); err != nil {
			t.Fatal(err)
		}
	}
	barrier(t, e.b)
	if in := tp.Info(); in.Partitions[0].FirstSeq != 1 {
		t.Fatalf("deleted before every group settled: %+v", in.Partitions)
	}
	ds := e.poll(g2, 5)
	for _, d := range ds[:3] {
		if err := e.settle(d, Ack()); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "first = 4", func() bool { return tp.Info().Partitions[0].FirstSeq == 4 })
	// a settled-by-all offset above an unsettled one stays
	if err := e.settle(ds[4], Ack()); err != nil {
		t.Fatal(err)
	}
	barrier(t, e.b)
	if f := tp.Info().Partitions[0].FirstSeq; f != 4 {
		t.Fatalf("first = %d, want 4", f)
	}
}

func TestLimitsRetention(t *testing.T) {
	clk := newFakeClock()
	e := newMemEnv(t, clk)
	tp := e.topic("q", TopicConfig{Retention: RetentionLimits, MaxMsgs: 3})
	g := e.group(tp, "g", GroupConfig{})
	for i := range 6 {
		e.publish(tp, fmt.Sprint(i))
	}
	clk.Advance(time.Second) // let a retention pass run
	waitFor(t, "max_msgs", func() bool { return tp.Info().Messages == 3 })
	if got := datas(e.poll(g, 10)); fmt.Sprint(got) != "[3 4 5]" {
		t.Fatalf("after max_msgs got %v", got)
	}

	tp2 := e.topic("aged", TopicConfig{Retention: RetentionLimits, MaxAgeMs: 1000})
	e.publish(tp2, "old")
	clk.Advance(600 * time.Millisecond)
	e.publish(tp2, "young")
	clk.Advance(600 * time.Millisecond)
	waitFor(t, "max_age", func() bool { return tp2.Info().Messages == 1 })
	g2 := e.group(tp2, "g", GroupConfig{})
	if got := datas(e.poll(g2, 10)); fmt.Sprint(got) != "[young]" {
		t.Fatalf("after max_age got %v", got)
	}
}

// TestWorkqueueDeletesSegments: on the real file log (64 KiB segments in
// tests), whole segments below the lowest frontier go once every group
// has settled them, and their files are removed.
func TestWorkqueueDeletesSegments(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "g", GroupConfig{})
	payload := string(make([]byte, 1000))
	for range 200 { // ~200 KB: several segments
		e.publish(tp, payload)
	}
	segs := func() int {
		ents, err := os.ReadDir(filepath.Join(tp.dir, "0", dataLogName))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, de := range ents {
			if strings.HasSuffix(de.Name(), ".seg") {
				n++
			}
		}
		return n
	}
	before := segs()
	if before < 3 {
		t.Fatalf("only %d segment files for 200 KB", before)
	}
	n := 0
	for n < 150 {
		for _, d := range e.poll(g, 150-n) {
			if err := e.settle(d, Ack()); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	waitFor(t, "segments deleted", func() bool {
		f := tp.Info().Partitions[0].FirstSeq
		return f > 1 && f <= 151
	})
	if after := segs(); after >= before {
		t.Fatalf("segment files %d -> %d", before, after)
	}
	// nothing unsettled was deleted
	got := 0
	for got < 50 {
		for _, d := range e.poll(g, 50) {
			if d.Handle.Seq <= 150 {
				t.Fatalf("settled offset %d delivered again", d.Handle.Seq)
			}
			got++
		}
	}
}

// TestRetentionPlan: when a pass is due and where it cuts, per policy and
// limit, before borrowers and side copies keep anything.
func TestRetentionPlan(t *testing.T) {
	x := extent{first: 1, last: 100}
	for seq := Seq(1); seq <= 100; seq++ {
		x.appended(seq, 10)
	}
	ageOf := func(cutoff int64, from Seq) Seq { return max(from, Seq(cutoff)) } // offset n stored at n
	for _, tc := range []struct {
		name    string
		cfg     TopicConfig
		low     Seq // lowest durable group frontier
		groups  bool
		asked   Seq
		purge   Seq
		now     int64
		due     bool
		wantCut Seq
	}{
		{"workqueue, no group keeps everything", TopicConfig{Retention: RetentionWorkqueue}, 50, false, 0, 0, 0, false, 1},
		{"workqueue cuts at the durable frontier", TopicConfig{Retention: RetentionWorkqueue}, 50, true, 0, 0, 0, true, 50},
		{"workqueue, already asked", TopicConfig{Retention: RetentionWorkqueue}, 50, true, 50, 0, 0, false, 50},
		{"limits ignore the frontier", TopicConfig{Retention: RetentionLimits}, 50, true, 0, 0, 0, false, 1},
		{"max msgs", TopicConfig{Retention: RetentionLimits, MaxMsgs: 10}, 0, false, 0, 0, 0, true, 91},
		{"max msgs, already asked", TopicConfig{Retention: RetentionLimits, MaxMsgs: 10}, 0, false, 91, 0, 0, false, 91},
		{"max bytes", TopicConfig{Retention: RetentionLimits, MaxBytes: 200}, 0, false, 0, 0, 0, true, 81},
		{"max age", TopicConfig{Retention: RetentionLimits, MaxAgeMs: 1}, 0, false, 0, 0, 1e6 + 40, true, 40},
		{"purge floor", TopicConfig{Retention: RetentionLimits}, 0, false, 0, 30, 0, true, 30},
		{"the highest cut wins", TopicConfig{Retention: RetentionWorkqueue, MaxMsgs: 10}, 95, true, 0, 20, 0, true, 95},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := x
			x.purgeFloor = tc.purge
			r := retention{askedCut: tc.asked}
			if got := r.due(&tc.cfg, &x, tc.low, tc.groups); got != tc.due {
				t.Errorf("due %v, want %v", got, tc.due)
			}
			if got := retentionCut(&tc.cfg, &x, tc.low, tc.groups, tc.now, ageOf); got != tc.wantCut {
				t.Errorf("cut %d, want %d", got, tc.wantCut)
			}
		})
	}
}
