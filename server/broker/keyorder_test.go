package broker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/wire"
)

// keyHdr is the header block of a record with Fibril-Key k ("": none).
func keyHdr(k string) []byte {
	if k == "" {
		return nil
	}
	return wire.AppendHeader(nil, wire.HeaderKey, k)
}

// TestKeyOrderBookkeeping: claim holds a free key, parks an offset behind
// a held one (refusing at the bound), lets keyless records go; release
// promotes the lowest parked offset that is not settled, and frees the
// slot when none is left.
func TestKeyOrderBookkeeping(t *testing.T) {
	type step struct {
		op      string // "claim", "release", "settle" (marks an offset settled)
		seq     Seq
		key     string
		want    keyVerdict // claim
		holders []Seq      // after the step, sorted
		freed   []Seq      // after the step, sorted
		parked  int
	}
	cases := []struct {
		name  string
		max   int
		steps []step
	}{
		{"keys run in parallel, one key in order", keyParkMax, []step{
			{op: "claim", seq: 1, key: "a", want: keyGo, holders: []Seq{1}},
			{op: "claim", seq: 2, key: "b", want: keyGo, holders: []Seq{1, 2}},
			{op: "claim", seq: 3, key: "a", want: keyParked, holders: []Seq{1, 2}, parked: 1},
			{op: "claim", seq: 4, key: "a", want: keyParked, holders: []Seq{1, 2}, parked: 2},
			{op: "release", seq: 1, holders: []Seq{2, 3}, freed: []Seq{3}, parked: 1},
			{op: "release", seq: 3, holders: []Seq{2, 4}, freed: []Seq{3, 4}, parked: 0},
			{op: "release", seq: 4, holders: []Seq{2}, freed: []Seq{3, 4}},
			{op: "claim", seq: 5, key: "a", want: keyGo, holders: []Seq{2, 5}, freed: []Seq{3, 4}},
		}},
		{"no key is its own key", keyParkMax, []step{
			{op: "claim", seq: 1, key: "", want: keyGo},
			{op: "claim", seq: 2, key: "", want: keyGo},
			{op: "release", seq: 1},
		}},
		{"a parked offset settled meanwhile is passed over", keyParkMax, []step{
			{op: "claim", seq: 1, key: "a", want: keyGo, holders: []Seq{1}},
			{op: "claim", seq: 2, key: "a", want: keyParked, holders: []Seq{1}, parked: 1},
			{op: "claim", seq: 3, key: "a", want: keyParked, holders: []Seq{1}, parked: 2},
			{op: "settle", seq: 2, holders: []Seq{1}, parked: 2},
			{op: "release", seq: 1, holders: []Seq{3}, freed: []Seq{3}},
		}},
		{"the slot goes with its last offset", keyParkMax, []step{
			{op: "claim", seq: 1, key: "a", want: keyGo, holders: []Seq{1}},
			{op: "claim", seq: 2, key: "a", want: keyParked, holders: []Seq{1}, parked: 1},
			{op: "settle", seq: 2, holders: []Seq{1}, parked: 1},
			{op: "release", seq: 1},
			{op: "claim", seq: 3, key: "a", want: keyGo, holders: []Seq{3}},
		}},
		{"parking is bounded", 2, []step{
			{op: "claim", seq: 1, key: "a", want: keyGo, holders: []Seq{1}},
			{op: "claim", seq: 2, key: "a", want: keyParked, holders: []Seq{1}, parked: 1},
			{op: "claim", seq: 3, key: "a", want: keyParked, holders: []Seq{1}, parked: 2},
			{op: "claim", seq: 4, key: "a", want: keyWait, holders: []Seq{1}, parked: 2},
			{op: "claim", seq: 4, key: "b", want: keyGo, holders: []Seq{1, 4}, parked: 2}, // a free key needs no room
			{op: "release", seq: 1, holders: []Seq{2, 4}, freed: []Seq{2}, parked: 1},
			{op: "claim", seq: 5, key: "a", want: keyParked, holders: []Seq{2, 4}, freed: []Seq{2}, parked: 2},
		}},
		{"releasing what holds nothing changes nothing", keyParkMax, []step{
			{op: "claim", seq: 1, key: "a", want: keyGo, holders: []Seq{1}},
			{op: "release", seq: 9, holders: []Seq{1}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newKeyOrder()
			k.max = tc.max
			settled := map[Seq]bool{}
			for i, s := range tc.steps {
				switch s.op {
				case "claim":
					if got := k.claim(s.seq, keyHdr(s.key)); got != s.want {
						t.Fatalf("step %d: claim %d (%q) = %d, want %d", i, s.seq, s.key, got, s.want)
					}
				case "release":
					k.release(s.seq, func(q Seq) bool { return settled[q] })
				case "settle":
					settled[s.seq] = true
				}
				var holders []Seq
				for q := range k.heads {
					holders = append(holders, q)
				}
				slices.Sort(holders)
				freed := slices.Clone([]Seq(k.freed))
				slices.Sort(freed)
				if !slices.Equal(holders, s.holders) || !slices.Equal(freed, s.freed) || k.parked != s.parked {
					t.Fatalf("step %d (%s %d): holders %v freed %v parked %d, want %v %v %d",
						i, s.op, s.seq, holders, freed, k.parked, s.holders, s.freed, s.parked)
				}
			}
		})
	}
}

// publishKeyed publishes data with Fibril-Key key ("": none), plus the
// header pairs kv.
func publishKeyed(t *testing.T, tp *Topic, key, data string, kv ...string) {
	t.Helper()
	if key != "" {
		kv = append([]string{wire.HeaderKey, key}, kv...)
	}
	publishHdr(t, tp, data, kv...)
}

// pollOnly polls g at once for up to ten and wants exactly want (in that
// order, at those attempts; attempts nil: all first deliveries).
func pollOnly(t *testing.T, e *testEnv, g *Group, owner OwnerID, want []string, attemptsWant []uint32) []Delivery {
	t.Helper()
	var ds []Delivery
	if len(want) == 0 {
		ds = e.pollNow(g, 10, owner)
	} else {
		// what becomes ready in a later round (a promotion, a timer) is
		// waited for; the answer then must be exactly want
		waitFor(t, fmt.Sprint(want), func() bool { ds = e.pollNow(g, 10, owner); return len(ds) > 0 })
	}
	if attemptsWant == nil {
		attemptsWant = make([]uint32, len(want))
		for i := range attemptsWant {
			attemptsWant[i] = 1
		}
	}
	if !slices.Equal(datas(ds), want) || !slices.Equal(attempts(ds), attemptsWant) {
		t.Fatalf("poll: %v at attempts %v, want %v at %v", datas(ds), attempts(ds), want, attemptsWant)
	}
	return ds
}

// TestOrderedKeyParallel: a group ordered by key hands out the first
// message of each key at once, with the messages without a key, and the
// next of a key only once the one before it is settled, in offset order;
// a NACKed message comes back before the next of its key.
func TestOrderedKeyParallel(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "bykey", GroupConfig{Ordered: wire.OrderKey, MaxDeliveries: -1})
	if g.Config().Ordered != wire.OrderKey {
		t.Fatalf("ordered %q", g.Config().Ordered)
	}
	for _, m := range [][2]string{{"a", "a1"}, {"b", "b1"}, {"a", "a2"}, {"", "n1"}, {"b", "b2"}, {"a", "a3"}, {"", "n2"}} {
		publishKeyed(t, tp, m[0], m[1])
	}
	ds := pollOnly(t, e, g, 0, []string{"a1", "b1", "n1", "n2"}, nil)
	pollOnly(t, e, g, 0, nil, nil)
	if err := e.settle(ds[1], Ack()); err != nil { // b1
		t.Fatal(err)
	}
	b2 := pollOnly(t, e, g, 0, []string{"b2"}, nil)
	if err := e.settle(ds[0], Ack()); err != nil { // a1
		t.Fatal(err)
	}
	a2 := pollOnly(t, e, g, 0, []string{"a2"}, nil)
	if err := e.settle(a2[0], Nack(0)); err != nil {
		t.Fatal(err)
	}
	a2 = pollOnly(t, e, g, 0, []string{"a2"}, []uint32{2})
	pollOnly(t, e, g, 0, nil, nil)
	for _, d := range []Delivery{a2[0], b2[0]} {
		if err := e.settle(d, Ack()); err != nil {
			t.Fatal(err)
		}
	}
	pollOnly(t, e, g, 0, []string{"a3"}, nil)
}

// TestOrderedKeyHandOn: a consumer that holds a key and goes silent hands
// it on when its lease ends, and one that goes away at once: its message
// comes back first, then the next of its key; a rejected message is
// dead-lettered and the next of its key follows.
func TestOrderedKeyHandOn(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, clk)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "bykey", GroupConfig{Ordered: wire.OrderKey, LeaseMs: 1000, MaxDeliveries: -1})
	for _, m := range [][2]string{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}, {"a", "a3"}} {
		publishKeyed(t, tp, m[0], m[1])
	}
	pollOnly(t, e, g, 7, []string{"a1", "b1"}, nil)
	clk.Advance(time.Second) // both leases end
	ds := pollOnly(t, e, g, 8, []string{"a1", "b1"}, []uint32{2, 2})
	e.b.ReleaseOwner(8)
	ds = pollOnly(t, e, g, 9, []string{"a1", "b1"}, []uint32{3, 3})
	if err := e.settle(ds[0], Reject()); err != nil {
		t.Fatal(err)
	}
	a2 := pollOnly(t, e, g, 9, []string{"a2"}, nil)
	if err := e.settle(a2[0], Ack()); err != nil {
		t.Fatal(err)
	}
	pollOnly(t, e, g, 9, []string{"a3"}, nil)
	dlq, ok := e.b.Topic(TopicName(DeadLetterTopic("q", "bykey")))
	if !ok {
		t.Fatal("no dead-letter topic")
	}
	if got := datas(e.poll(e.group(dlq, "x", GroupConfig{}), 10)); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("dead letters %v, want a1", got)
	}
}

// TestOrderedKeyDelayed: a held-back message holds back its key only: the
// next of its key waits behind it, other keys flow on, and once due it
// goes out before the next of its key.
func TestOrderedKeyDelayed(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, clk)
	tp := e.topic("q", TopicConfig{AllowMsgDelay: true})
	g := e.group(tp, "bykey", GroupConfig{Ordered: wire.OrderKey})
	publishKeyed(t, tp, "a", "a1", wire.HeaderDelay, "5s")
	publishKeyed(t, tp, "a", "a2")
	publishKeyed(t, tp, "b", "b1")
	pollOnly(t, e, g, 0, []string{"b1"}, nil)
	pollOnly(t, e, g, 0, nil, nil)
	clk.Advance(5 * time.Second)
	ds := pollOnly(t, e, g, 0, []string{"a1"}, nil)
	pollOnly(t, e, g, 0, nil, nil)
	if err := e.settle(ds[0], Ack()); err != nil {
		t.Fatal(err)
	}
	pollOnly(t, e, g, 0, []string{"a2"}, nil)
}

// TestOrderedKeyScanBound: behind a busy key more messages than one round
// reads (filterScan) are parked over several rounds, the other key's
// message after them still goes out, and each parked one goes out in
// order as the one before it is settled.
func TestOrderedKeyScanBound(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{Durability: DurabilityNone})
	g := e.group(tp, "bykey", GroupConfig{Ordered: wire.OrderKey})
	const n = filterScan + 200
	ctx := context.Background()
	for i := range n {
		m := Message{Subject: "q", Header: keyHdr("a"), Data: fmt.Appendf(nil, "a%d", i)}
		if _, err := tp.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	publishKeyed(t, tp, "b", "b")
	got := pollOnly(t, e, g, 0, []string{"a0"}, nil) // the round that delivers it parks filterScan more
	pollOnly(t, e, g, 0, []string{"b"}, nil)
	pollOnly(t, e, g, 0, nil, nil)
	for i := 1; i < 5; i++ {
		if err := e.settle(got[0], Ack()); err != nil {
			t.Fatal(err)
		}
		got = pollOnly(t, e, g, 0, []string{fmt.Sprintf("a%d", i)}, nil)
	}
}

// TestOrderedKeyRestart: after a restart the message that held a key
// comes back first (ready again), the message parked behind it stays
// parked, and a key whose holder was settled goes on with its next.
func TestOrderedKeyRestart(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "bykey", GroupConfig{Ordered: wire.OrderKey})
	for _, m := range [][2]string{{"a", "a1"}, {"b", "b1"}, {"a", "a2"}, {"b", "b2"}, {"c", "c1"}} {
		publishKeyed(t, tp, m[0], m[1])
	}
	ds := pollOnly(t, e, g, 0, []string{"a1", "b1", "c1"}, nil)
	if err := e.settle(ds[1], Ack()); err != nil {
		t.Fatal(err)
	}
	e.restart()
	tp, _ = e.b.Topic("q")
	g, _ = tp.FindGroup("bykey")
	ds = pollOnly(t, e, g, 0, []string{"a1", "c1", "b2"}, []uint32{2, 2, 1})
	pollOnly(t, e, g, 0, nil, nil)
	if err := e.settle(ds[0], Ack()); err != nil {
		t.Fatal(err)
	}
	pollOnly(t, e, g, 0, []string{"a2"}, nil)
}

// TestOrderedKeyAcrossPowerCut: a power cut while keys are held keeps the
// order: after recovery the held messages come back first and no key has
// two messages out, however many were parked, then each key goes on in
// offset order.
func TestOrderedKeyAcrossPowerCut(t *testing.T) {
	for _, durSync := range []bool{false, true} {
		t.Run(fmt.Sprint("sync=", durSync), func(t *testing.T) {
			clk := newFakeClock()
			c := newClockedPowerCutEnv(t, clk, durSync)
			tp := c.topic("q", TopicConfig{})
			g := c.group(tp, "bykey", GroupConfig{Ordered: wire.OrderKey})
			for _, m := range [][2]string{{"a", "a1"}, {"b", "b1"}, {"a", "a2"}, {"b", "b2"}, {"a", "a3"}, {"b", "b3"}, {"", "n1"}} {
				publishKeyed(t, tp, m[0], m[1])
			}
			ds := pollOnly(t, c.testEnv, g, 0, []string{"a1", "b1", "n1"}, nil)
			if err := c.settle(ds[1], Ack()); err != nil { // b1: b2 is promoted, not yet out
				t.Fatal(err)
			}
			c.powerCut()
			tp, _ = c.b.Topic("q")
			g, _ = tp.FindGroup("bykey")
			ds = pollOnly(t, c.testEnv, g, 0, []string{"a1", "n1", "b2"}, []uint32{2, 2, 1})
			pollOnly(t, c.testEnv, g, 0, nil, nil)
			for _, d := range ds {
				if err := c.settle(d, Ack()); err != nil {
					t.Fatal(err)
				}
			}
			ds = pollOnly(t, c.testEnv, g, 0, []string{"a2", "b3"}, nil)
			if err := c.settle(ds[0], Ack()); err != nil {
				t.Fatal(err)
			}
			pollOnly(t, c.testEnv, g, 0, []string{"a3"}, nil)
		})
	}
}

// TestOrderedKeyParkBound: at the parking bound the group hands out
// nothing newer (head-of-line) and loses nothing: each parked message of
// the busy key goes out in order as the one before it is acked, and the
// other key's message once there is room to reach it.
func TestOrderedKeyParkBound(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "bykey", GroupConfig{Ordered: wire.OrderKey})
	set := make(chan struct{})
	tp.parts[0].control(func(p *partition) { p.groups[g.id].keys.max = 2; close(set) })
	<-set
	for _, m := range [][2]string{{"a", "a1"}, {"a", "a2"}, {"a", "a3"}, {"a", "a4"}, {"a", "a5"}, {"b", "b1"}} {
		publishKeyed(t, tp, m[0], m[1])
	}
	ds := pollOnly(t, e, g, 0, []string{"a1"}, nil) // a2, a3 parked; a4 finds no room
	for _, want := range [][]string{{"a2"}, {"a3", "b1"}, {"a4"}, {"a5"}} {
		if err := e.settle(ds[0], Ack()); err != nil {
			t.Fatal(err)
		}
		ds = pollOnly(t, e, g, 0, want, nil)
	}
}

// TestOrderedKeyExpiredParked: a parked message whose TTL ran out while
// it waited is settled when its turn comes, and the next of its key
// follows at once.
func TestOrderedKeyExpiredParked(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, clk)
	tp := e.topic("q", TopicConfig{AllowMsgTTL: true})
	g := e.group(tp, "bykey", GroupConfig{Ordered: wire.OrderKey})
	publishKeyed(t, tp, "a", "a1")
	publishKeyed(t, tp, "a", "a2", wire.HeaderTTL, "1s")
	publishKeyed(t, tp, "a", "a3")
	ds := pollOnly(t, e, g, 0, []string{"a1"}, nil)
	clk.Advance(2 * time.Second)
	if err := e.settle(ds[0], Ack()); err != nil {
		t.Fatal(err)
	}
	pollOnly(t, e, g, 0, []string{"a3"}, nil)
}

// TestOrderedKeyRestartHeldBackKeepsParked: after a restart a message
// held back before it is held back again without moving the group's head
// past the messages parked below it (next restarts at the frontier): the
// parked message of the busy key still goes out once the key is free.
func TestOrderedKeyRestartHeldBackKeepsParked(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, clk)
	tp := e.topic("q", TopicConfig{AllowMsgDelay: true})
	g := e.group(tp, "bykey", GroupConfig{Ordered: wire.OrderKey})
	publishKeyed(t, tp, "a", "a1")
	publishKeyed(t, tp, "a", "a2")
	publishKeyed(t, tp, "", "later", wire.HeaderDelay, "1h")
	pollOnly(t, e, g, 0, []string{"a1"}, nil)
	e.restart()
	tp, _ = e.b.Topic("q")
	g, _ = tp.FindGroup("bykey")
	ds := pollOnly(t, e, g, 0, []string{"a1"}, []uint32{2})
	if err := e.settle(ds[0], Ack()); err != nil {
		t.Fatal(err)
	}
	pollOnly(t, e, g, 0, []string{"a2"}, nil)
}

// TestKeyOrderCompact: after a burst of keys the maps are rebuilt at the
// size of what still holds a key (Go maps do not shrink), keeping it.
func TestKeyOrderCompact(t *testing.T) {
	k := newKeyOrder()
	const n = 1<<16 + 100
	for i := range n {
		k.hold(Seq(i+1), uint64(i))
	}
	k.compact()
	if k.peak != n {
		t.Fatalf("compacted at its peak: peak %d", k.peak)
	}
	never := func(Seq) bool { return false }
	for i := 10; i < n; i++ {
		k.release(Seq(i+1), never)
	}
	k.compact()
	if k.peak != 10 || len(k.heads) != 10 || len(k.slots) != 10 {
		t.Fatalf("after the burst: peak %d, %d heads, %d slots, want 10 each", k.peak, len(k.heads), len(k.slots))
	}
	for i := range 10 {
		if !k.holds(Seq(i + 1)) {
			t.Fatalf("offset %d lost its key in the rebuild", i+1)
		}
	}
}

// TestOrderedKeyRetention: when retention removes a key's holder and
// messages parked behind it, the key goes on with its first message that
// is still stored, in order.
func TestOrderedKeyRetention(t *testing.T) {
	clk := newFakeClock()
	e := newMemEnv(t, clk) // the test store truncates exactly, not by segment
	tp := e.topic("q", TopicConfig{Retention: RetentionLimits, MaxMsgs: 4})
	g := e.group(tp, "bykey", GroupConfig{Ordered: wire.OrderKey})
	for _, m := range [][2]string{{"a", "a1"}, {"a", "a2"}, {"a", "a3"}, {"b", "b1"}} {
		publishKeyed(t, tp, m[0], m[1])
	}
	pollOnly(t, e, g, 0, []string{"a1", "b1"}, nil)
	publishKeyed(t, tp, "a", "a4")
	publishKeyed(t, tp, "a", "a5") // a1 and a2 go
	clk.Advance(time.Second)       // let a retention pass run
	waitFor(t, "max_msgs", func() bool { return tp.Info().Messages == 4 })
	ds := pollOnly(t, e, g, 0, []string{"a3"}, nil)
	for _, want := range []string{"a4", "a5"} {
		pollOnly(t, e, g, 0, nil, nil)
		if err := e.settle(ds[0], Ack()); err != nil {
			t.Fatal(err)
		}
		ds = pollOnly(t, e, g, 0, []string{want}, nil)
	}
}
