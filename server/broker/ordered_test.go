package broker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/wire"
)

// TestOrderedGroup: a group with ordered "partition" hands out one
// message at a time in offset order: a poll for ten gets one, nothing
// more until it is settled; a NACK (with or without a delay), an expired
// lease and a release give the same message again before any later one;
// a reject dead-letters it and the next follows; the order survives a
// restart; an unordered group beside it gets everything at once.
func TestOrderedGroup(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, clk)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "ord", GroupConfig{Ordered: wire.OrderPartition, LeaseMs: 1000, MaxDeliveries: -1})
	free := e.group(tp, "free", GroupConfig{})
	for i := range 6 {
		e.publish(tp, fmt.Sprintf("m%d", i))
	}
	if got := e.poll(free, 10); len(got) != 6 {
		t.Fatalf("unordered group got %d of 6 at once", len(got))
	}
	// one returns the only delivery a poll for ten gets now.
	one := func(what, want string, attempt uint32) Delivery {
		t.Helper()
		ds := e.pollNow(g, 10, 0)
		if len(ds) != 1 || string(ds[0].Data) != want || ds[0].Attempt != attempt {
			t.Fatalf("%s: got %v (attempt %v), want only %s at attempt %d", what, datas(ds), attempts(ds), want, attempt)
		}
		if more := e.pollNow(g, 10, 0); len(more) != 0 {
			t.Fatalf("%s: %v handed out while %s is out", what, datas(more), want)
		}
		return ds[0]
	}
	d := one("first", "m0", 1)
	if err := e.settle(d, Ack()); err != nil {
		t.Fatal(err)
	}
	d = one("after an ack", "m1", 1)
	if err := e.settle(d, Nack(0)); err != nil {
		t.Fatal(err)
	}
	d = one("after a nack", "m1", 2)
	if err := e.settle(d, Nack(500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if got := e.pollNow(g, 10, 0); len(got) != 0 {
		t.Fatalf("%v handed out while m1 waits out its NACK delay", datas(got))
	}
	clk.Advance(500 * time.Millisecond)
	waitFor(t, "m1 after its delay", func() bool {
		ds := e.pollNow(g, 10, 0)
		if len(ds) == 0 {
			return false
		}
		if len(ds) != 1 || string(ds[0].Data) != "m1" || ds[0].Attempt != 3 {
			t.Fatalf("after the NACK delay: %v, want m1 at attempt 3", datas(ds))
		}
		d = ds[0]
		return true
	})
	clk.Advance(time.Second) // d's lease ends
	waitFor(t, "m1 after its lease", func() bool {
		ds := e.pollNow(g, 10, 0)
		if len(ds) == 0 {
			return false
		}
		if len(ds) != 1 || string(ds[0].Data) != "m1" || ds[0].Attempt != 4 {
			t.Fatalf("after the lease: %v, want m1 at attempt 4", datas(ds))
		}
		d = ds[0]
		return true
	})
	if err := e.settle(d, Reject()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "m2 once m1 is dead-lettered", func() bool {
		ds := e.pollNow(g, 10, 0)
		if len(ds) == 0 {
			return false
		}
		if len(ds) != 1 || string(ds[0].Data) != "m2" {
			t.Fatalf("after the reject: %v, want only m2", datas(ds))
		}
		d = ds[0]
		return true
	})
	dlq, ok := e.b.Topic(TopicName(DeadLetterTopic("q", "ord")))
	if !ok {
		t.Fatal("no dead-letter topic")
	}
	if got := e.poll(e.group(dlq, "x", GroupConfig{}), 10); len(got) != 1 || string(got[0].Data) != "m1" {
		t.Fatalf("dead letters %v, want m1", datas(got))
	}

	// A restart while m2 is out: m2 comes first again, then the rest in order.
	e.restart()
	tp, _ = e.b.Topic("q")
	g, _ = tp.FindGroup("ord")
	if g.Config().Ordered != wire.OrderPartition {
		t.Fatalf("ordered after restart: %q", g.Config().Ordered)
	}
	for i, want := range []string{"m2", "m3", "m4", "m5"} {
		attempt := uint32(1)
		if i == 0 {
			attempt = 2
		}
		d := one("after the restart", want, attempt)
		if err := e.settle(d, Ack()); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.pollNow(g, 10, 0); len(got) != 0 {
		t.Fatalf("after the last: %v", datas(got))
	}
}

// TestOrderedGroupRelease: an owner that goes away gives its message back
// at once, and the next owner gets that message, not a later one.
func TestOrderedGroupRelease(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "ord", GroupConfig{Ordered: wire.OrderPartition})
	e.publish(tp, "a")
	e.publish(tp, "b")
	if ds := e.pollNow(g, 5, 7); len(ds) != 1 || string(ds[0].Data) != "a" {
		t.Fatalf("owner 7 got %v", datas(ds))
	}
	if ds := e.pollNow(g, 5, 8); len(ds) != 0 {
		t.Fatalf("owner 8 got %v while a is out", datas(ds))
	}
	e.b.ReleaseOwner(7)
	var got []Delivery
	waitFor(t, "the released message", func() bool { got = e.pollNow(g, 5, 8); return len(got) > 0 })
	if len(got) != 1 || string(got[0].Data) != "a" || got[0].Attempt != 2 {
		t.Fatalf("owner 8 after the release got %v (attempts %v), want only a at attempt 2", datas(got), attempts(got))
	}
}

// TestOrderedGroupInvalid: ordered takes none, partition or key; none is
// stored as no setting.
func TestOrderedGroupInvalid(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	for _, o := range []wire.Ordering{"keys", "Partition", "yes"} {
		if _, err := tp.Group("g", GroupConfig{Ordered: o}); !errors.Is(err, ErrInvalid) {
			t.Errorf("ordered %q: err %v, want ErrInvalid", o, err)
		}
	}
	g := e.group(tp, "none", GroupConfig{Ordered: wire.OrderNone})
	if g.Config().Ordered != "" || !g.Config().Equal(mustResolve(t, GroupConfig{}, "q", "none")) {
		t.Fatalf("ordered none stored as %q", g.Config().Ordered)
	}
}

func attempts(ds []Delivery) []uint32 {
	out := make([]uint32, len(ds))
	for i, d := range ds {
		out[i] = d.Attempt
	}
	return out
}
