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
