package broker

import (
	"fmt"
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
