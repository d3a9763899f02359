package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestPublishPollAck(t *testing.T) {
	for _, durSync := range []bool{false, true} {
		t.Run(fmt.Sprint("sync=", durSync), func(t *testing.T) { testPublishPollAck(t, durSync) })
	}
}

func testPublishPollAck(t *testing.T, durSync bool) {
	e := newEnv(t, nil)
	if durSync {
		e.b.Close()
		e.durSync = true
		e.open()
	}
	tp := e.topic("orders", TopicConfig{})
	g := e.group(tp, "workers", GroupConfig{})
	for i := range 5 {
		pos := e.publish(tp, fmt.Sprint("m", i))
		if pos != (Position{Seq: Seq(i + 1)}) {
			t.Fatalf("position %v, want 0:%d", pos, i+1)
		}
	}
	ds := e.poll(g, 3)
	if got := datas(ds); !slices.Equal(got, []string{"m0", "m1", "m2"}) {
		t.Fatalf("first poll %v", got)
	}
	for _, d := range ds {
		if d.Attempt != 1 || d.Subject != "orders" || d.Handle.Group != g.ID() || d.Handle.Topic != tp.ID() {
			t.Fatalf("bad delivery %+v", d)
		}
		if err := d.Ack(context.Background()); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	// ack again: idempotent
	if err := ds[0].Ack(context.Background()); err != nil {
		t.Fatalf("second ack: %v", err)
	}
	ds = e.poll(g, 10)
	if got := datas(ds); !slices.Equal(got, []string{"m3", "m4"}) {
		t.Fatalf("second poll %v", got)
	}
	waitFor(t, "info inflight 2 pending 2", func() bool {
		in := g.Info()
		return in.Inflight == 2 && in.Pending == 2
	})
	// nothing ready: Poll waits until ctx ends
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if ds, err := g.Poll(ctx, 1); !errors.Is(err, context.DeadlineExceeded) || len(ds) != 0 {
		t.Fatalf("empty poll = %v, %v", ds, err)
	}
	// a long poll is answered by a later publish
	ch := make(chan []string, 1)
	if err := g.PollAsync(5, time.Minute, 1, func(ds []Delivery, err error) { ch <- datas(ds) }); err != nil {
		t.Fatal(err)
	}
	e.publish(tp, "late")
	select {
	case got := <-ch:
		if !slices.Equal(got, []string{"late"}) {
			t.Fatalf("long poll got %v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long poll not answered")
	}
}

func TestSettleErrors(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "g", GroupConfig{})
	e.publish(tp, "a")
	d1 := e.poll(g, 1)[0]
	if err := e.settle(d1, Nack(0)); err != nil {
		t.Fatalf("nack: %v", err)
	}
	d2 := e.poll(g, 1)[0]
	if d2.Attempt != 2 || d2.Handle.Seq != d1.Handle.Seq {
		t.Fatalf("redelivery %+v", d2.Handle)
	}
	tests := []struct {
		name string
		h    Handle
		op   SettleOp
		want error
	}{
		{"stale attempt", d1.Handle, Ack(), ErrStaleHandle},
		{"future attempt", Handle{tp.ID(), g.ID(), 0, d1.Handle.Seq, 9}, Ack(), ErrUnknownHandle},
		{"unknown topic", Handle{99, g.ID(), 0, 1, 1}, Ack(), ErrUnknownHandle},
		{"unknown group", Handle{tp.ID(), 99, 0, 1, 1}, Ack(), ErrUnknownHandle},
		{"unknown partition", Handle{tp.ID(), g.ID(), 5, 1, 1}, Ack(), ErrUnknownHandle},
		{"never delivered", Handle{tp.ID(), g.ID(), 0, 50, 1}, Ack(), ErrUnknownHandle},
		{"offset 0", Handle{tp.ID(), g.ID(), 0, 0, 1}, Ack(), ErrUnknownHandle},
		{"attempt 0", Handle{tp.ID(), g.ID(), 0, d1.Handle.Seq, 0}, Ack(), ErrUnknownHandle},
		{"extend ok", d2.Handle, Extend(time.Minute), nil},
		{"ack ok", d2.Handle, Ack(), nil},
		{"ack again ok", d2.Handle, Ack(), nil},
		{"nack after ack ok", d2.Handle, Nack(0), nil},
		{"extend after ack", d2.Handle, Extend(0), ErrNotInflight},
		{"bad kind", d2.Handle, SettleOp{Kind: 42}, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.b.settleWait(context.Background(), tt.h, tt.op)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestLeaseExpiry(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, clk)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "g", GroupConfig{LeaseMs: 1000})
	e.publish(tp, "a")
	d := e.poll(g, 1)[0]
	if got := e.pollNow(g, 1, 0); len(got) != 0 {
		t.Fatalf("leased message delivered again: %v", datas(got))
	}
	// extend by 5s, then 2s pass: still leased
	if err := e.settle(d, Extend(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	if got := e.pollNow(g, 1, 0); len(got) != 0 {
		t.Fatal("extended lease expired early")
	}
	clk.Advance(3*time.Second + time.Millisecond)
	var again []Delivery
	waitFor(t, "redelivery after expiry", func() bool {
		again = e.pollNow(g, 1, 0)
		return len(again) == 1
	})
	if again[0].Attempt != 2 {
		t.Fatalf("attempt %d, want 2", again[0].Attempt)
	}
	if err := e.settle(d, Ack()); !errors.Is(err, ErrStaleHandle) {
		t.Fatalf("ack with expired handle: %v", err)
	}
	if err := e.settle(again[0], Ack()); err != nil {
		t.Fatal(err)
	}
}

func TestNackDelay(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, clk)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "g", GroupConfig{})
	e.publish(tp, "a")
	d := e.poll(g, 1)[0]
	if err := e.settle(d, Nack(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := e.pollNow(g, 1, 0); len(got) != 0 {
		t.Fatal("delayed nack redelivered at once")
	}
	clk.Advance(time.Second)
	waitFor(t, "delayed redelivery", func() bool { return len(e.pollNow(g, 1, 0)) == 1 })
}

func TestFanOutAndCompeting(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	g1 := e.group(tp, "a", GroupConfig{})
	g2 := e.group(tp, "b", GroupConfig{})
	for i := range 4 {
		e.publish(tp, fmt.Sprint(i))
	}
	// competing within g1: two polls split the messages
	x, y := e.poll(g1, 2), e.poll(g1, 2)
	if got := append(datas(x), datas(y)...); !slices.Equal(got, []string{"0", "1", "2", "3"}) {
		t.Fatalf("g1 got %v", got)
	}
	// fan-out: g2 still sees everything
	if got := datas(e.poll(g2, 10)); !slices.Equal(got, []string{"0", "1", "2", "3"}) {
		t.Fatalf("g2 got %v", got)
	}
}

func TestStartNew(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	e.publish(tp, "old")
	g := e.group(tp, "g", GroupConfig{Start: StartNew})
	e.publish(tp, "new")
	if got := datas(e.poll(g, 10)); !slices.Equal(got, []string{"new"}) {
		t.Fatalf("got %v", got)
	}
}

func TestReleaseOwner(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "g", GroupConfig{})
	e.publish(tp, "a")
	e.publish(tp, "b")
	if got := e.pollNow(g, 2, 7); len(got) != 2 {
		t.Fatalf("got %d", len(got))
	}
	if got := e.pollNow(g, 2, 8); len(got) != 0 {
		t.Fatal("leased messages delivered to another owner")
	}
	e.b.ReleaseOwner(7)
	var got []Delivery
	waitFor(t, "released leases", func() bool {
		got = append(got, e.pollNow(g, 2, 8)...)
		return len(got) == 2
	})
	for _, d := range got {
		if d.Attempt != 2 {
			t.Fatalf("attempt %d after release, want 2", d.Attempt)
		}
	}
}

func TestSubscribeCredit(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "g", GroupConfig{})
	got := make(chan Delivery, 10)
	s, err := g.Subscribe(3, 2, func(d Delivery) { got <- d.clone() })
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		e.publish(tp, fmt.Sprint(i))
	}
	recv := func() Delivery {
		select {
		case d := <-got:
			return d
		case <-time.After(5 * time.Second):
			t.Fatal("no delivery")
			return Delivery{}
		}
	}
	a, b := recv(), recv()
	if string(a.Data) != "0" || string(b.Data) != "1" {
		t.Fatalf("got %q %q", a.Data, b.Data)
	}
	// no credit left: the poll-based view shows 2 inflight and nothing else is pushed
	waitFor(t, "inflight 2", func() bool { return g.Info().Inflight == 2 })
	if len(got) != 0 {
		t.Fatal("delivered beyond credit")
	}
	if err := e.settle(a, Ack()); err != nil {
		t.Fatal(err)
	}
	if c := recv(); string(c.Data) != "2" {
		t.Fatalf("after credit: %q", c.Data)
	}
	s.Close()
	if err := e.settle(b, Ack()); err != nil {
		t.Fatal(err)
	}
	// closed: the rest goes to pollers
	if got := datas(e.poll(g, 10)); !slices.Equal(got, []string{"3", "4"}) {
		t.Fatalf("poll after close: %v", got)
	}
}

func TestRouteAndOverlap(t *testing.T) {
	e := newEnv(t, nil)
	orders := e.topic("orders", TopicConfig{Subjects: []string{"orders.*", "orders.eu.>"}})
	_ = orders
	if _, err := e.b.CreateTopic("other", TopicConfig{Subjects: []string{"orders.x"}}); !errors.Is(err, ErrOverlap) {
		t.Fatalf("overlap accepted: %v", err)
	}
	if _, err := e.b.CreateTopic("orders", TopicConfig{Subjects: []string{"zzz"}}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("dup accepted: %v", err)
	}
	if _, err := e.b.CreateTopic("$sys", TopicConfig{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("reserved accepted: %v", err)
	}
	e.topic("audit", TopicConfig{})
	tests := []struct {
		subject string
		want    TopicName
	}{
		{"orders.new", "orders"},
		{"orders.eu.de.x", "orders"},
		{"orders", ""},
		{"orders.a.b", ""},
		{"audit", "audit"},
		{"$DLQ.orders.g", ""},
	}
	for _, tt := range tests {
		got := e.b.Route(tt.subject)
		var name TopicName
		if got != nil {
			name = got.Name()
		}
		if name != tt.want {
			t.Errorf("Route(%q) = %q, want %q", tt.subject, name, tt.want)
		}
	}
}

func TestCatalogPersistsAndIDsNotReused(t *testing.T) {
	e := newEnv(t, nil)
	a := e.topic("a", TopicConfig{Partitions: 3})
	ga := e.group(a, "g", GroupConfig{LeaseMs: 1234})
	aid, gid := a.ID(), ga.ID()
	if err := e.b.DeleteTopic("a"); err != nil {
		t.Fatal(err)
	}
	e.restart()
	if _, ok := e.b.Topic("a"); ok {
		t.Fatal("deleted topic came back")
	}
	a2 := e.topic("a", TopicConfig{})
	g2 := e.group(a2, "g", GroupConfig{})
	if a2.ID() == aid || g2.ID() == gid {
		t.Fatalf("ids reused: topic %d->%d group %d->%d", aid, a2.ID(), gid, g2.ID())
	}
	b := e.topic("b", TopicConfig{Partitions: 2, Retention: RetentionLimits})
	e.group(b, "x", GroupConfig{LeaseMs: 777})
	e.restart()
	b2, ok := e.b.Topic("b")
	if !ok || b2.Config().Partitions != 2 || b2.Config().Retention != RetentionLimits {
		t.Fatalf("topic b after restart: %v %+v", ok, b2)
	}
	gx, ok := b2.FindGroup("x")
	if !ok || gx.Config().LeaseMs != 777 {
		t.Fatalf("group x after restart: %v", ok)
	}
	if _, ok := e.b.Topic(TopicName(DeadLetterTopic("b", "x"))); !ok {
		t.Fatal("dead-letter topic missing")
	}
}

func TestKeyedPartitioning(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("k", TopicConfig{Partitions: 4})
	ctx := context.Background()
	var first Position
	for i := range 10 {
		pos, err := tp.Publish(ctx, Message{Subject: "k", Key: []byte("customer-42"), Data: []byte{byte(i)}})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = pos
		} else if pos.Partition != first.Partition || pos.Seq != first.Seq+Seq(i) {
			t.Fatalf("keyed publish %d went to %v (first %v)", i, pos, first)
		}
	}
	seen := map[Partition]bool{}
	for range 8 {
		pos, err := tp.Publish(ctx, Message{Subject: "k", Data: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		seen[pos.Partition] = true
	}
	if len(seen) != 4 {
		t.Fatalf("round robin used %d partitions", len(seen))
	}
	g := e.group(tp, "g", GroupConfig{})
	n := 0
	for n < 18 {
		for _, d := range e.poll(g, 100) {
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
}

func TestCRCMismatch(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	_, err := tp.Publish(context.Background(), Message{Subject: "q", Data: []byte("x"), CRC: 1})
	if !errors.Is(err, ErrCRCMismatch) {
		t.Fatalf("got %v", err)
	}
}

func TestDurabilityPolicies(t *testing.T) {
	for _, d := range []Durability{DurabilitySync, DurabilityGroup, DurabilityNone} {
		t.Run(string(d), func(t *testing.T) {
			e := newEnv(t, nil)
			tp := e.topic("q", TopicConfig{Durability: d, Partitions: 2})
			g := e.group(tp, "g", GroupConfig{})
			for i := range 6 {
				e.publish(tp, fmt.Sprint(i))
			}
			var acked, kept []string
			for len(acked)+len(kept) < 6 {
				for _, dl := range e.poll(g, 6) {
					if dl.Handle.Seq%2 == 0 {
						if err := e.settle(dl, Ack()); err != nil {
							t.Fatal(err)
						}
						acked = append(acked, string(dl.Data))
					} else {
						kept = append(kept, string(dl.Data))
					}
				}
			}
			e.restart() // graceful: even "none" is flushed at Close
			tp, _ = e.b.Topic("q")
			g, _ = tp.FindGroup("g")
			var again []string
			for len(again) < len(kept) {
				for _, dl := range e.poll(g, 6) {
					if dl.Attempt != 2 {
						t.Fatalf("attempt %d after restart", dl.Attempt)
					}
					again = append(again, string(dl.Data))
				}
			}
			slices.Sort(kept)
			slices.Sort(again)
			if !slices.Equal(kept, again) {
				t.Fatalf("redelivered %v, want %v", again, kept)
			}
		})
	}
}

func TestGroupInfoCountsOutOfOrderAcks(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "g", GroupConfig{})
	for i := range 5 {
		e.publish(tp, fmt.Sprint(i))
	}
	ds := e.poll(g, 5)
	for _, i := range []int{1, 3} {
		if err := e.settle(ds[i], Ack()); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "pending 3, inflight 3", func() bool {
		in := g.Info()
		return in.Pending == 3 && in.Inflight == 3
	})
}

// TestOpenRejectsBadSegmentSizes: segment sizes outside what seglog
// accepts are refused when the broker opens, not at the first roll.
func TestOpenRejectsBadSegmentSizes(t *testing.T) {
	for _, o := range []Options{
		{SegmentSize: -5}, {SegmentSize: 100}, {SegmentSize: 4 << 30},
		{EventSegmentSize: -1}, {EventSegmentSize: 1 << 40},
	} {
		b, err := Open(t.TempDir(), o)
		if err == nil {
			b.Close()
			t.Errorf("%+v: opened", o)
		} else if !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", o, err)
		}
	}
}
