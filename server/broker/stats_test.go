package broker

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// recObserver records ObserveSync calls.
type recObserver struct {
	mu      sync.Mutex
	calls   int
	records int
}

func (o *recObserver) ObserveSync(d time.Duration, records int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
	o.records += records
}

func (o *recObserver) get() (int, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.calls, o.records
}

func TestGroupCountersMove(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, clk)
	tp := e.topic("jobs", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{LeaseMs: 1000, MaxDeliveries: 3})
	for _, s := range []string{"a", "b", "c", "d"} {
		e.publish(tp, s)
	}
	waitFor(t, "published 4", func() bool { return tp.Info().Published == 4 && tp.Info().Partitions[0].Published == 4 })
	waitFor(t, "ready 4", func() bool { in := g.Info(); return in.Ready == 4 && in.Pending == 4 })

	ds := e.poll(g, 4)
	if len(ds) != 4 {
		t.Fatalf("polled %d, want 4", len(ds))
	}
	waitFor(t, "delivered 4", func() bool { in := g.Info(); return in.Delivered == 4 && in.Inflight == 4 && in.Ready == 0 })
	clk.Advance(1500 * time.Millisecond) // lease ages the frontier message
	waitFor(t, "oldest age", func() bool { return g.Info().OldestUnackedMs >= 1500 })

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// the leases ran out: all four expired and are ready again
	waitFor(t, "expired 4", func() bool { in := g.Info(); return in.Expired == 4 && in.Ready == 4 })
	ds = e.poll(g, 4)
	if len(ds) != 4 {
		t.Fatalf("re-polled %d, want 4", len(ds))
	}
	must(e.settle(ds[0], Ack()))
	must(e.settle(ds[1], Nack(0)))
	must(e.settle(ds[2], Reject()))
	must(e.settle(ds[0], Ack())) // idempotent: counted once
	waitFor(t, "counters", func() bool {
		in := g.Info()
		return in.Delivered == 8 && in.Redelivered == 4 && in.Acked == 1 && in.Nacked == 1 &&
			in.Rejected == 1 && in.DeadLettered == 1 && in.Inflight == 1
	})
	in := g.Info()
	if len(in.Partitions) != 1 || in.Partitions[0].GroupCounters != in.GroupCounters {
		t.Fatalf("per-partition counters %+v do not add up to %+v", in.Partitions, in.GroupCounters)
	}
	if in.Partitions[0].Frontier != 2 {
		t.Fatalf("frontier %d, want 2", in.Partitions[0].Frontier)
	}
	if ti := tp.Info(); ti.DiskBytes <= 0 || ti.Partitions[0].DiskBytes != ti.DiskBytes {
		t.Fatalf("disk bytes %d / %d", ti.DiskBytes, ti.Partitions[0].DiskBytes)
	}
	// everything settled: the age gauge drops to 0
	for _, d := range []Delivery{ds[3]} {
		must(e.settle(d, Ack()))
	}
	d := e.poll(g, 1)[0]
	must(e.settle(d, Ack()))
	waitFor(t, "all settled", func() bool { in := g.Info(); return in.Pending == 0 && in.OldestUnackedMs == 0 && in.Acked == 3 })
}

func TestObserverSeesGroupCommits(t *testing.T) {
	for _, dur := range []Durability{DurabilityGroup, DurabilitySync} {
		t.Run(string(dur), func(t *testing.T) {
			obs := &recObserver{}
			o := Options{Logf: t.Logf, SegmentSize: 64 << 10, Observer: obs}
			b, err := Open(t.TempDir(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			tp, err := b.CreateTopic("obs", TopicConfig{Durability: dur})
			if err != nil {
				t.Fatal(err)
			}
			const n = 20
			errs := make(chan error, n)
			for i := 0; i < n; i++ {
				go func() {
					_, err := tp.Publish(t.Context(), Message{Subject: "obs", Data: []byte("x")})
					errs <- err
				}()
			}
			for i := 0; i < n; i++ {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			// a publish is confirmed only after its commit was observed
			calls, recs := obs.get()
			if calls == 0 || recs != n {
				t.Fatalf("observer: %d calls, %d records, want >0 and %d", calls, recs, n)
			}
			st := b.Stats()
			if st.Syncs != uint64(calls) || st.SyncedRecords != n || st.SyncTime <= 0 {
				t.Fatalf("stats %+v, observer %d calls", st, calls)
			}
		})
	}
}

// The admin API serves the infos as JSON: counters are flat fields.
func TestInfoJSON(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("jobs", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{})
	e.publish(tp, "a")
	if err := e.settle(e.poll(g, 1)[0], Ack()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "acked", func() bool { return g.Info().Acked == 1 })
	b, err := json.Marshal(g.Info())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"delivered":1`, `"acked":1`, `"paused":false`, `"partitions":[{"partition":0,"frontier":2`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("group JSON %s lacks %s", b, want)
		}
	}
	b, err = json.Marshal(tp.Info())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"published":1`, `"unsettled_bytes":0`, `"disk_bytes":`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("topic JSON %s lacks %s", b, want)
		}
	}
}

// TestPartStats: store counts what no group settled from low to last, says
// when that count went down, and info reports what it stored.
func TestPartStats(t *testing.T) {
	var s partStats
	for _, c := range []struct {
		name                string
		first, last, low    Seq
		messages, unsettled int64
		shrank              bool
	}{
		{"empty", 1, 0, 1, 0, 0, false},
		{"all unsettled", 1, 10, 1, 10, 10, false},
		{"some settled", 1, 10, 6, 10, 5, true},
		{"all settled", 4, 10, 11, 7, 0, true},
		{"more published", 4, 20, 11, 17, 10, false},
		{"unchanged", 4, 20, 11, 17, 10, false},
	} {
		shrank := s.store(c.first, c.last, c.low, 100, 50, uint64(c.last))
		if shrank != c.shrank {
			t.Errorf("%s: shrank = %v, want %v", c.name, shrank, c.shrank)
		}
		in := s.info()
		if in.FirstSeq != c.first || in.LastSeq != c.last || in.Messages != c.messages || in.Unsettled != c.unsettled ||
			in.Bytes != 100 || in.UnsettledBytes != 50 || in.Published != uint64(c.last) {
			t.Errorf("%s: info = %+v, want first %d last %d messages %d unsettled %d", c.name, in, c.first, c.last, c.messages, c.unsettled)
		}
	}
}
