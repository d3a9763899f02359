package broker

import (
	"fmt"
	"testing"
)

// TestPollOf1024FitsSmallEventSegments is the regression test for "with
// --event-segment-size 4096 a POLL of 1,024 fails": the round's 1,024
// delivery events made one 8,240-byte event record, which no 4 KiB event
// segment holds, so the write failed with "entry too large" while the
// messages were delivered, every later ACK of the partition failed the
// same way, and after a restart the un-acked messages counted as settled.
// Now event records are cut to fit the event segment size.
func TestPollOf1024FitsSmallEventSegments(t *testing.T) {
	for _, size := range []int64{4096, 8192} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			e := newEnvWith(t, func(o *Options) { o.EventSegmentSize = size; o.Logf = t.Logf })
			tp := e.topic("orders", TopicConfig{})
			g := e.group(tp, "billing", GroupConfig{})
			for i := range 1030 {
				e.publish(tp, fmt.Sprint("m", i))
			}
			ds := e.pollNow(g, 1024, 0)
			if len(ds) != 1024 {
				t.Fatalf("poll of 1024 delivered %d", len(ds))
			}
			for _, d := range ds[:500] {
				if err := e.settle(d, Ack()); err != nil {
					t.Fatalf("ack %d: %v", d.Handle.Seq, err)
				}
			}
			if err := e.b.Close(); err != nil {
				t.Fatal(err)
			}
			b, err := Open(e.dir, e.opts())
			if err != nil {
				t.Fatal(err)
			}
			e.b = b
			tp, _ = b.Topic("orders")
			g, _ = tp.Group("billing", GroupConfig{})
			ds = e.pollNow(g, 2000, 0)
			if len(ds) != 530 || ds[0].Handle.Seq != 501 {
				t.Fatalf("after a restart %d messages ready (first %v), want the 530 un-acked from 501", len(ds), ds[0].Handle)
			}
			for _, d := range ds[:524] {
				if d.Attempt != 2 {
					t.Fatalf("offset %d: attempt %d after a restart, want 2 (its delivery was recorded)", d.Handle.Seq, d.Attempt)
				}
			}
		})
	}
}
