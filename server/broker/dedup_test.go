package broker

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/fibrilmq/fibril/internal/memstore"
	"github.com/fibrilmq/fibril/wire"
)

// pubID publishes data to t with message id id (none when empty).
func (e *testEnv) pubID(t *Topic, id, data string) Position {
	e.t.Helper()
	pos, err := pubIDErr(t, id, data)
	if err != nil {
		e.t.Fatalf("Publish %s: %v", id, err)
	}
	return pos
}

func pubIDErr(t *Topic, id, data string) (Position, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m := Message{Subject: string(t.Name()), Data: []byte(data)}
	if id != "" {
		m.Header = wire.AppendHeader(nil, wire.HeaderMsgID, id)
	}
	return t.Publish(ctx, m)
}

func window(ms int64) *int64 { return &ms }

// TestDedupIndex drives the index alone: lookups within and after the
// window, the bound, a round's pending ids settled or forgotten.
func TestDedupIndex(t *testing.T) {
	type step struct {
		op   string // add, pend, settle, fail, expire
		id   string
		seq  Seq
		at   int64
		want Seq // for look: 0 = not found
	}
	cases := []struct {
		name  string
		max   int
		steps []step
		drop  uint64
	}{
		{"within window", 10, []step{{op: "add", id: "a", seq: 5, at: 100}, {op: "look", id: "a", at: 150, want: 5}, {op: "look", id: "b", at: 150}}, 0},
		{"window edge", 10, []step{{op: "add", id: "a", seq: 5, at: 100}, {op: "look", id: "a", at: 200, want: 5}, {op: "look", id: "a", at: 201}}, 0},
		{"expired then added again", 10, []step{{op: "add", id: "a", seq: 5, at: 100}, {op: "expire", at: 300}, {op: "add", id: "a", seq: 9, at: 300},
			{op: "expire", at: 350}, {op: "look", id: "a", at: 350, want: 9}}, 0},
		{"bound forgets the oldest", 2, []step{{op: "add", id: "a", seq: 1, at: 100}, {op: "add", id: "b", seq: 2, at: 100}, {op: "add", id: "c", seq: 3, at: 100},
			{op: "look", id: "a", at: 100}, {op: "look", id: "b", at: 100, want: 2}, {op: "look", id: "c", at: 100, want: 3}}, 1},
		{"pending settled", 10, []step{{op: "pend", id: "a", seq: 0, at: 100}, {op: "pend", id: "b", seq: 1, at: 100}, {op: "settle", seq: 40},
			{op: "look", id: "a", at: 100, want: 40}, {op: "look", id: "b", at: 100, want: 41}, {op: "oldest", want: 40}}, 0},
		{"round past the bound", 2, []step{{op: "pend", id: "a", seq: 0, at: 100}, {op: "pend", id: "b", seq: 1, at: 100}, {op: "pend", id: "c", seq: 2, at: 100},
			{op: "settle", seq: 10}, {op: "look", id: "a", at: 100}, {op: "look", id: "b", at: 100, want: 11}, {op: "look", id: "c", at: 100, want: 12},
			{op: "oldest", want: 11}}, 1},
		{"pending failed", 10, []step{{op: "add", id: "x", seq: 7, at: 90}, {op: "pend", id: "a", seq: 0, at: 100}, {op: "fail"},
			{op: "look", id: "a", at: 100}, {op: "look", id: "x", at: 100, want: 7}, {op: "oldest", want: 7}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := newDedupIndex(100, tc.max)
			for i, s := range tc.steps {
				switch s.op {
				case "add":
					x.add(s.id, s.seq, s.at, -1)
				case "pend":
					x.add(s.id, 0, s.at, int32(s.seq))
				case "settle":
					x.settle(s.seq, false)
				case "fail":
					x.settle(0, true)
				case "expire":
					x.expire(s.at)
				case "look":
					e, ok := x.lookup([]byte(s.id), s.at)
					if got := e.seq; ok != (s.want != 0) || got != s.want {
						t.Fatalf("step %d: lookup %s at %d = %d, %v; want %d", i, s.id, s.at, got, ok, s.want)
					}
				case "oldest":
					if got, ok := x.oldest(); !ok || got != s.want {
						t.Fatalf("step %d: oldest = %d, %v; want %d", i, got, ok, s.want)
					}
				}
				if x.len() > tc.max {
					t.Fatalf("step %d: %d ids, bound %d", i, x.len(), tc.max)
				}
			}
			if x.dropped != tc.drop {
				t.Fatalf("dropped %d, want %d", x.dropped, tc.drop)
			}
		})
	}
}

// TestDuplicatePublish: a publish with an id seen within the window is
// confirmed with the original's position, marked duplicate, and not
// stored; after the window, with another id, or with the window off it
// is stored.
func TestDuplicatePublish(t *testing.T) {
	cases := []struct {
		name    string
		window  *int64
		ids     []string
		advance time.Duration // before the second publish
		dup     bool
	}{
		{"same id within the window", nil, []string{"a", "a"}, time.Minute, true},
		{"same id at the window's end", window(1000), []string{"a", "a"}, time.Second, true},
		{"same id after the window", window(1000), []string{"a", "a"}, time.Second + time.Millisecond, false},
		{"other id", nil, []string{"a", "b"}, 0, false},
		{"no id", nil, []string{"", ""}, 0, false},
		{"window off", window(0), []string{"a", "a"}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			e := newEnv(t, clk)
			tp := e.topic("q", TopicConfig{DuplicateWindowMs: tc.window})
			first := e.pubID(tp, tc.ids[0], "one")
			if first.Duplicate {
				t.Fatalf("first publish marked duplicate: %+v", first)
			}
			clk.Advance(tc.advance)
			second := e.pubID(tp, tc.ids[1], "two")
			if second.Duplicate != tc.dup {
				t.Fatalf("second publish %+v, want duplicate %v", second, tc.dup)
			}
			wantMsgs := int64(2)
			if tc.dup {
				wantMsgs = 1
				if second.Seq != first.Seq || second.Partition != first.Partition {
					t.Fatalf("duplicate confirmed at %v, original at %v", second, first)
				}
			} else if second.Seq != first.Seq+1 {
				t.Fatalf("stored at %v after %v", second, first)
			}
			if n := tp.Info().Messages; n != wantMsgs {
				t.Fatalf("%d messages stored, want %d", n, wantMsgs)
			}
		})
	}
}

// TestDuplicateInOneRound: publishes with one id handed to the partition
// at once (one round, or a few) store one message; every confirm names
// it.
func TestDuplicateInOneRound(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	const n = 50
	var wg sync.WaitGroup
	pos := make([]Position, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		m := Message{Subject: "q", Header: wire.AppendHeader(nil, wire.HeaderMsgID, fmt.Sprint("id-", i%5)), Data: []byte{byte(i)}}
		if err := tp.PublishAsync(m, func(p Position, err error) { pos[i], errs[i] = p, err; wg.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	byID := map[int]Position{}
	dups := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("publish %d: %v", i, errs[i])
		}
		p := pos[i]
		if p.Duplicate {
			dups++
		}
		p.Duplicate = false
		if was, ok := byID[i%5]; ok && was != p {
			t.Fatalf("id-%d confirmed at %v and %v", i%5, was, p)
		}
		byID[i%5] = p
	}
	if dups != n-5 || tp.Info().Messages != 5 {
		t.Fatalf("%d duplicates, %d stored; want %d and 5", dups, tp.Info().Messages, n-5)
	}
}

// TestDuplicateAcrossRestart: the ids are found again in the data log
// after a clean restart, within the window only.
func TestDuplicateAcrossRestart(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, clk)
	tp := e.topic("q", TopicConfig{DuplicateWindowMs: window(60000)})
	e.pubID(tp, "", "plain")
	a := e.pubID(tp, "a", "one")
	clk.Advance(30 * time.Second)
	b := e.pubID(tp, "b", "two")
	e.restart()
	tp, _ = e.b.Topic("q")
	if got := e.pubID(tp, "a", "again"); !got.Duplicate || got.Seq != a.Seq {
		t.Fatalf("after restart: %+v, want duplicate of %v", got, a)
	}
	clk.Advance(31 * time.Second) // a's window ended, b's has not
	e.restart()
	tp, _ = e.b.Topic("q")
	if got := e.pubID(tp, "b", "again"); !got.Duplicate || got.Seq != b.Seq {
		t.Fatalf("after second restart: %+v, want duplicate of %v", got, b)
	}
	if got := e.pubID(tp, "a", "again"); got.Duplicate || got.Seq <= b.Seq {
		t.Fatalf("a after its window: %+v, want stored anew", got)
	}
}

// TestDuplicateAcrossPowerCut: a confirmed publish's id survives a power
// cut (everything not fsynced lost): the data log's record is durable
// before its confirm, and the index is rebuilt from it.
func TestDuplicateAcrossPowerCut(t *testing.T) {
	for _, durSync := range []bool{false, true} {
		t.Run(fmt.Sprint("sync=", durSync), func(t *testing.T) {
			clk := newFakeClock()
			c := newClockedPowerCutEnv(t, clk, durSync)
			tp := c.topic("q", TopicConfig{})
			var want []Position
			for i := range 20 {
				want = append(want, c.pubID(tp, fmt.Sprint("id-", i), "x"))
			}
			c.powerCut()
			tp, _ = c.b.Topic("q")
			for i, w := range want {
				if got := c.pubID(tp, fmt.Sprint("id-", i), "again"); !got.Duplicate || got.Seq != w.Seq {
					t.Fatalf("id-%d after the power cut: %+v, want duplicate of %v", i, got, w)
				}
			}
			if n := tp.Info().Messages; n != 20 {
				t.Fatalf("%d messages, want 20", n)
			}
		})
	}
}

// TestDuplicateBound: at duplicate_max_ids the oldest id is forgotten
// first; the newest are still found, also after a restart.
func TestDuplicateBound(t *testing.T) {
	e := newEnv(t, newFakeClock())
	tp := e.topic("q", TopicConfig{DuplicateMaxIDs: 3})
	var pos []Position
	for _, id := range []string{"a", "b", "c", "d"} {
		pos = append(pos, e.pubID(tp, id, id))
	}
	check := func(when string) {
		t.Helper()
		for i, id := range []string{"b", "c", "d"} {
			if got := e.pubID(tp, id, "again"); !got.Duplicate || got.Seq != pos[i+1].Seq {
				t.Fatalf("%s: %s = %+v, want duplicate of %v", when, id, got, pos[i+1])
			}
		}
	}
	check("running")
	e.restart()
	tp, _ = e.b.Topic("q")
	check("after restart")
	if got := e.pubID(tp, "a", "again"); got.Duplicate {
		t.Fatalf("a past the bound: %+v, want stored anew", got)
	}
}

// TestDuplicateRoutesByID: with several partitions a publish with an id
// and no key goes to partition xxhash64(id) % partitions, so its
// duplicates meet it; a key still wins.
func TestDuplicateRoutesByID(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{Partitions: 4})
	for i := range 20 {
		id := fmt.Sprint("order-", i)
		want := Partition(xxhash.Sum64String(id) % 4)
		p1 := e.pubID(tp, id, "x")
		p2 := e.pubID(tp, id, "x")
		if p1.Partition != want || !p2.Duplicate || p2.Partition != want || p2.Seq != p1.Seq {
			t.Fatalf("%s: %+v then %+v, want partition %d and a duplicate", id, p1, p2, want)
		}
	}
	ctx := context.Background()
	m := Message{Subject: "q", Key: []byte("k"), Header: wire.AppendHeader(nil, wire.HeaderMsgID, "keyed")}
	pos, err := tp.Publish(ctx, m)
	if err != nil || pos.Partition != Partition(xxhash.Sum64String("k")%4) {
		t.Fatalf("keyed publish at %+v, %v: want the key's partition", pos, err)
	}
}

// TestDuplicateConfig: the defaults, the window off, values out of range
// and an id too long; dead-letter topics do not de-duplicate.
func TestDuplicateConfig(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	if c := tp.Config(); c.DuplicateWindowMs == nil || *c.DuplicateWindowMs != wire.DefaultDuplicateWindowMs || c.DuplicateMaxIDs != wire.DefaultDuplicateMaxIDs {
		t.Fatalf("defaults: %v, %d", c.DuplicateWindowMs, c.DuplicateMaxIDs)
	}
	*tp.Config().DuplicateWindowMs = 1 // a copy: the topic keeps its own
	if w := *tp.Config().DuplicateWindowMs; w != wire.DefaultDuplicateWindowMs {
		t.Fatalf("Config shares the window: %d", w)
	}
	for _, bad := range []TopicConfig{{DuplicateWindowMs: window(-1)}, {DuplicateWindowMs: window(maxLeaseMs + 1)},
		{DuplicateMaxIDs: -1}, {DuplicateMaxIDs: wire.MaxDuplicateMaxIDs + 1}} {
		if _, err := e.b.CreateTopic("bad", bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("CreateTopic(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	long := string(make([]byte, wire.MaxMsgIDLen+1))
	for i := range []byte(long) {
		long = long[:i] + "x" + long[i+1:]
	}
	if _, err := pubIDErr(tp, long, "x"); !errors.Is(err, ErrMsgIDTooLong) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("id of %d bytes: %v, want ErrInvalid", len(long), err)
	}
	e.group(tp, "g", GroupConfig{})
	dl, ok := e.b.Topic(TopicName(DeadLetterTopic("q", "g")))
	if !ok || *dl.Config().DuplicateWindowMs != 0 {
		t.Fatalf("dead-letter topic: %v %+v", ok, dl)
	}
}

// TestDuplicateWorkqueueKeepsRecords: under workqueue retention the
// records whose ids are remembered stay on disk after every group settled
// them (a pass would delete their segments), so a restart within the
// window still finds them; with the window off the same pass deletes
// them.
func TestDuplicateWorkqueueKeepsRecords(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("dedup=", on), func(t *testing.T) {
			clk := newFakeClock()
			e := newEnv(t, clk)
			cfg := TopicConfig{Retention: RetentionWorkqueue}
			if !on {
				cfg.DuplicateWindowMs = window(0)
			}
			tp := e.topic("q", cfg)
			g := e.group(tp, "g", GroupConfig{DeadLetter: "-"})
			body := string(make([]byte, 8<<10)) // 64 KiB segments: several
			var first Position
			for i := range 30 {
				p := e.pubID(tp, fmt.Sprint("id-", i), body)
				if i == 0 {
					first = p
				}
			}
			for acked := 0; acked < 30; {
				for _, d := range e.poll(g, 30) {
					if err := e.settle(d, Ack()); err != nil {
						t.Fatal(err)
					}
					acked++
				}
			}
			var low Seq
			err := tp.onActor(context.Background(), 0, func(p *partition) {
				p.ret.lastRun = 0
				p.now = clk.Now().UnixNano()
				p.retain()
				low = p.first
			})
			if err != nil {
				t.Fatal(err)
			}
			if on != (low == first.Seq) {
				t.Fatalf("first retained offset %d after retention (dedup %v)", low, on)
			}
			if !on {
				return
			}
			e.restart()
			tp, _ = e.b.Topic("q")
			if got := e.pubID(tp, "id-0", "again"); !got.Duplicate || got.Seq != first.Seq {
				t.Fatalf("after restart: %+v, want duplicate of %v", got, first)
			}
		})
	}
}

// pubExpect publishes with message id id (none when empty) on the
// condition that the partition's last message had id last.
func pubExpect(t *Topic, id, last string) (Position, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m := Message{Subject: string(t.Name()), Data: []byte(id), ExpectLastMsgID: last}
	if id != "" {
		m.Header = wire.AppendHeader(nil, wire.HeaderMsgID, id)
	}
	return t.Publish(ctx, m)
}

// TestExpectLastMsgID: a publish with ExpectLastMsgID is stored only when
// the partition's last message carried that id (also after a restart and
// within one round); otherwise it fails naming the last id; a duplicate is
// answered as one before the check.
func TestExpectLastMsgID(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	wantLast := func(err error, last string) {
		t.Helper()
		var le *LastMsgIDError
		if !errors.Is(err, ErrWrongLastMsgID) || !errors.As(err, &le) || le.Last != last {
			t.Fatalf("err %v, want a wrong last msg ID naming %q", err, last)
		}
	}
	_, err := pubExpect(tp, "a", "x")
	wantLast(err, "")
	a := e.pubID(tp, "a", "a")
	if p, err := pubExpect(tp, "b", "a"); err != nil || p.Seq != a.Seq+1 {
		t.Fatalf("expect a after a: %+v, %v", p, err)
	}
	_, err = pubExpect(tp, "c", "a")
	wantLast(err, "b")
	if p, err := pubExpect(tp, "a", "zzz"); err != nil || !p.Duplicate || p.Seq != a.Seq {
		t.Fatalf("duplicate with a wrong expectation: %+v, %v", p, err)
	}
	e.restart()
	tp, _ = e.b.Topic("q")
	_, err = pubExpect(tp, "c", "a")
	wantLast(err, "b")
	if _, err := pubExpect(tp, "c", "b"); err != nil {
		t.Fatalf("expect b after a restart: %v", err)
	}
	e.pubID(tp, "", "no id")
	_, err = pubExpect(tp, "d", "c")
	wantLast(err, "")

	// One round: each publish expects the one before it.
	var wg sync.WaitGroup
	errs := make([]error, 10)
	prev := ""
	e.pubID(tp, "r0", "r0")
	for i := range errs {
		id := fmt.Sprint("r", i+1)
		prev = fmt.Sprint("r", i)
		wg.Add(1)
		m := Message{Subject: "q", Header: wire.AppendHeader(nil, wire.HeaderMsgID, id), ExpectLastMsgID: prev}
		if err := tp.PublishAsync(m, func(_ Position, err error) { errs[i] = err; wg.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("chained publish %d: %v", i, err)
		}
	}

	off := e.topic("off", TopicConfig{DuplicateWindowMs: window(0)})
	if _, err := pubExpect(off, "a", "a"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("expectation on a topic without de-duplication: %v", err)
	}
}

// BenchmarkPublishMsgID: the cost of de-duplication on the publish path,
// on test stores with durability none (no fsync: the engine's CPU alone).
// One op is one 128-byte publish, 256 in flight: no header, a header
// without an id, a new id each (each remembered, bound 100000), the same
// id each (all duplicates after the first).
func BenchmarkPublishMsgID(b *testing.B) {
	for _, mode := range []string{"no-header", "header-no-id", "new-ids", "same-id"} {
		b.Run(mode, func(b *testing.B) {
			br, err := Open(b.TempDir(), Options{OpenStore: memstore.New().Open})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			tp, err := br.CreateTopic("q", TopicConfig{Durability: DurabilityNone, Retention: RetentionLimits, MaxMsgs: 1 << 20})
			if err != nil {
				b.Fatal(err)
			}
			data := make([]byte, 128)
			sem := make(chan struct{}, 256)
			done := func(Position, error) { <-sem }
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				m := Message{Subject: "q", Data: data}
				switch mode {
				case "header-no-id":
					m.Header = wire.AppendHeader(nil, "X-Trace", "t-1")
				case "new-ids":
					m.Header = wire.AppendHeader(nil, wire.HeaderMsgID, fmt.Sprint("id-", i))
				case "same-id":
					m.Header = wire.AppendHeader(nil, wire.HeaderMsgID, "id")
				}
				sem <- struct{}{}
				for tp.PublishAsync(m, done) == ErrQueueFull {
					runtime.Gosched()
				}
			}
			for range cap(sem) {
				sem <- struct{}{}
			}
		})
	}
}

// BenchmarkDedupIndex: one new id per op looked up, added and settled at
// the default bound (100000 remembered, so each add also forgets one).
func BenchmarkDedupIndex(b *testing.B) {
	x := newDedupIndex(120e9, wire.DefaultDuplicateMaxIDs)
	ids := make([][]byte, 1<<17)
	for i := range ids {
		ids[i] = []byte(fmt.Sprintf("order-%012d", i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := ids[i&(len(ids)-1)]
		if _, ok := x.lookup(id, int64(i)); ok {
			b.Fatal("found a new id")
		}
		s := string(id)
		x.add(s, 0, int64(i), 0)
		x.settle(Seq(i+1), false)
	}
}

// TestDuplicateDefaultsForOldCatalogs: a topic entry written before the
// de-duplication fields existed reads with their defaults (so TOPIC CREATE
// with its configuration stays idempotent), and one that turned it off
// stays off.
func TestDuplicateDefaultsForOldCatalogs(t *testing.T) {
	old := catTopic{ID: 1, Name: "q", Config: TopicConfig{Subjects: []string{"q"}, Partitions: 1, Durability: DurabilityGroup,
		Retention: RetentionWorkqueue, FullPolicy: FullBlock, BlockTimeoutMs: DefaultBlockTimeoutMs}}
	if err := old.validate(2, 1); err != nil {
		t.Fatal(err)
	}
	if w := old.Config.DuplicateWindowMs; w == nil || *w != wire.DefaultDuplicateWindowMs || old.Config.DuplicateMaxIDs != wire.DefaultDuplicateMaxIDs {
		t.Fatalf("old entry reads as %v, %d", w, old.Config.DuplicateMaxIDs)
	}
	if want, err := (TopicConfig{}).Resolve("q"); err != nil || !reflect.DeepEqual(want, old.Config) {
		t.Fatalf("old entry %+v differs from a new default topic %+v (%v)", old.Config, want, err)
	}
	off := old
	off.Config.DuplicateWindowMs = window(0)
	if err := off.validate(2, 1); err != nil || *off.Config.DuplicateWindowMs != 0 {
		t.Fatalf("window 0 read as %d, %v", *off.Config.DuplicateWindowMs, err)
	}
}
