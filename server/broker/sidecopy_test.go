package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/fibrilmq/fibril/internal/crashfs"
	"github.com/fibrilmq/fibril/server/seglog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// powerCutEnv is a broker on file logs whose writes go through crashfs
// (one for the data logs, one for the event logs), so a test can cut the
// power: every write never fsynced is lost, the page cache with it.
type powerCutEnv struct {
	*testEnv
	dataFS, evFS *crashfs.FS
	noSide       bool
	evSyncEvery  time.Duration // the background event fsync's interval (0: an hour, i.e. none)
	refuseEvery  int64         // refuse every refuseEvery-th side copy (0: none)
	refused      atomic.Int64
	mu           sync.Mutex
	logs         []*seglog.Log
	logged       []string
}

func newPowerCutEnv(t *testing.T, noSide bool) *powerCutEnv {
	t.Helper()
	c := &powerCutEnv{testEnv: &testEnv{t: t, dir: t.TempDir()}, dataFS: crashfs.New(seglog.OSFS()), evFS: crashfs.New(seglog.OSFS()), noSide: noSide}
	c.start()
	t.Cleanup(func() {
		if c.b != nil {
			c.b.Close()
		}
	})
	return c
}

// newClockedPowerCutEnv is a started power-cut environment on clock clk,
// durability sync when durSync (else the topics' default).
func newClockedPowerCutEnv(t *testing.T, clk Clock, durSync bool) *powerCutEnv {
	t.Helper()
	c := &powerCutEnv{testEnv: &testEnv{t: t, dir: t.TempDir(), clock: clk, durSync: durSync},
		dataFS: crashfs.New(seglog.OSFS()), evFS: crashfs.New(seglog.OSFS())}
	c.start()
	t.Cleanup(func() {
		if c.b != nil {
			c.b.Close()
		}
	})
	return c
}

func (c *powerCutEnv) start() {
	c.t.Helper()
	o := c.opts()
	o.noSideCopies = c.noSide
	o.eventSyncEvery = cmp.Or(c.evSyncEvery, time.Hour) // by default no background event fsync: the test decides what is synced
	o.Logf = func(f string, args ...any) {
		c.mu.Lock()
		c.logged = append(c.logged, fmt.Sprintf(f, args...))
		c.mu.Unlock()
		c.t.Logf(f, args...)
	}
	o.OpenStore = func(dir string, policy seglog.Policy) (seglog.Store, error) {
		so := seglog.Options{Policy: policy, SegmentSize: o.SegmentSize, FS: c.dataFS}
		if strings.HasSuffix(dir, eventsLogName) {
			so.FS, so.SegmentSize = c.evFS, o.EventSegmentSize
		}
		l, err := seglog.Open(dir, so)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.logs = append(c.logs, l)
		c.mu.Unlock()
		if c.refuseEvery > 0 && !strings.HasSuffix(dir, eventsLogName) {
			return &refusingSide{Log: l, c: c}, nil
		}
		return l, nil
	}
	b, err := Open(c.dir, o)
	if err != nil {
		c.t.Fatalf("Open: %v", err)
	}
	c.b = b
}

// powerCut drops the logs as if the machine died, loses every write not
// fsynced, and opens the broker again. The partition actors are held
// while the logs are abandoned: Abandon unmaps the segments, and an actor
// still reading a record it was handed before (a round on its own timer
// or upkeep) would fault; reads after Abandon fail with ErrClosed.
func (c *powerCutEnv) powerCut() {
	c.t.Helper()
	release := make(chan struct{})
	var held sync.WaitGroup
	for _, tp := range c.b.Topics() {
		for _, p := range tp.parts {
			held.Add(1)
			if err := p.controlChecked(func(*partition) { held.Done(); <-release }); err != nil {
				held.Done() // closing already
			}
		}
	}
	held.Wait()
	c.mu.Lock()
	for _, l := range c.logs {
		l.Abandon()
	}
	c.logs = nil
	c.mu.Unlock()
	close(release)
	c.b.Close() // the logs are gone: no snapshot, no clean marker
	c.b = nil
	for _, fs := range []*crashfs.FS{c.dataFS, c.evFS} {
		if _, err := fs.Crash(nil, crashfs.CrashDropAll); err != nil {
			c.t.Fatal(err)
		}
	}
	c.start()
}

// refusingSide is a data log that refuses every c.refuseEvery-th side
// record as if the segment had no room left (a fault injector).
type refusingSide struct {
	*seglog.Log
	c     *powerCutEnv
	calls atomic.Int64
}

func (r *refusingSide) AppendSide(e seglog.Entry) (uint64, error) {
	if r.calls.Add(1)%r.c.refuseEvery == 0 {
		r.c.refused.Add(1)
		return 0, seglog.ErrSideNoRoom
	}
	return r.Log.AppendSide(e)
}

func (c *powerCutEnv) sawLog(substr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.logged {
		if strings.Contains(l, substr) {
			return true
		}
	}
	return false
}

// TestAckSurvivesPowerCutWithEventLogUnsynced: with side copies an ack is
// answered once the data log's fsync has its events, while the event log
// is not fsynced. A power cut then loses the event log's record of the
// acks, and recovery restores them from the data log: no acked message is
// delivered again, every unacked one is. On a workqueue topic whose acked
// segments retention drops meanwhile (messages published and acked in
// turns, so side copies sit in every segment), the side copies the event
// log still needs are kept. Without side copies (the event log fsynced
// before each answer) the outcome is the same.
func TestAckSurvivesPowerCutWithEventLogUnsynced(t *testing.T) {
	for _, tc := range []struct {
		name          string
		noSide        bool
		cfg           TopicConfig
		n, ack, chunk int
	}{
		{"side copies", false, TopicConfig{}, 5, 3, 5},
		{"side copies, workqueue retention", false, TopicConfig{Retention: RetentionWorkqueue}, 900, 750, 50},
		{"no side copies", true, TopicConfig{Retention: RetentionWorkqueue}, 900, 750, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newPowerCutEnv(t, tc.noSide)
			tp := c.topic("q", tc.cfg)
			g := c.group(tp, "w", GroupConfig{DeadLetter: "-"})
			body := strings.Repeat("x", 1000)
			acked := 0
			for i := 0; i < tc.n; i += tc.chunk {
				for j := i; j < i+tc.chunk && j < tc.n; j++ {
					c.publish(tp, fmt.Sprintf("%04d%s", j, body))
				}
				for acked < min(tc.ack, i+tc.chunk) {
					for _, d := range c.pollNow(g, min(tc.chunk, tc.ack-acked), 1) {
						if err := c.settle(d, Ack()); err != nil {
							t.Fatalf("ack: %v", err)
						}
						acked++
					}
				}
			}
			c.publish(tp, "last") // a round after the acks: retention runs
			if tc.cfg.Retention == RetentionWorkqueue {
				waitFor(t, "retention to drop acked segments", func() bool { return tp.Info().Partitions[0].FirstSeq > 1 })
			}
			c.powerCut()
			if restored := c.sawLog("restored events"); restored == tc.noSide {
				t.Fatalf("events restored from side copies: %v, want %v", restored, !tc.noSide)
			}
			tp, _ = c.b.Topic("q")
			// Every ack was answered with the event log unsynced, so at
			// least the last acks are restored (the background event fsync
			// may have covered earlier ones).
			if n := tp.Info().Partitions[0].RestoredEvents; (n > 0) == tc.noSide || n > uint64(2*tc.ack) {
				t.Fatalf("PartitionInfo.RestoredEvents = %d (no side copies: %v, %d acks)", n, tc.noSide, tc.ack)
			}
			g, _ = tp.FindGroup("w")
			got := map[string]bool{}
			for {
				ds := c.pollNow(g, 100, 2)
				if len(ds) == 0 {
					break
				}
				for _, d := range ds {
					got[string(d.Data[:min(4, len(d.Data))])] = true
				}
			}
			for i := 0; i < tc.n; i++ {
				if key := fmt.Sprintf("%04d", i); got[key] != (i >= tc.ack) {
					t.Fatalf("message %d delivered after the power cut: %v (acked: %v)", i, got[key], i < tc.ack)
				}
			}
			if !got["last"] || len(got) != tc.n-tc.ack+1 {
				t.Fatalf("delivered after the power cut: %d messages, want %d", len(got), tc.n-tc.ack+1)
			}
		})
	}
}

// TestCommitWaitsForOneFsync: with side copies a publish, a delivery and an
// ack each wait for the data log's fsync only: over a hundred of them the
// event log is fsynced a few times in the background, against once per
// answer without side copies.
func TestCommitWaitsForOneFsync(t *testing.T) {
	const n = 100
	for _, noSide := range []bool{false, true} {
		c := newPowerCutEnv(t, noSide)
		tp := c.topic("q", TopicConfig{})
		g := c.group(tp, "w", GroupConfig{DeadLetter: "-"})
		ev0, _ := c.evFS.SyncCounts()
		data0, _ := c.dataFS.SyncCounts()
		for i := 0; i < n; i++ {
			c.publish(tp, fmt.Sprint(i))
			ds := c.poll(g, 1)
			if err := c.settle(ds[0], Ack()); err != nil {
				t.Fatal(err)
			}
		}
		ev1, _ := c.evFS.SyncCounts()
		data1, _ := c.dataFS.SyncCounts()
		evSyncs, dataSyncs := ev1-ev0, data1-data0
		t.Logf("side copies %v: %d data fsyncs, %d event fsyncs for %d publish-poll-ack cycles", !noSide, dataSyncs, evSyncs, n)
		if dataSyncs < n {
			t.Fatalf("side copies %v: %d data fsyncs for %d publishes", !noSide, dataSyncs, n)
		}
		if !noSide && evSyncs > n/5 {
			t.Fatalf("side copies on: %d event fsyncs for %d cycles, want the background's few", evSyncs, n)
		}
		if noSide && evSyncs < n {
			t.Fatalf("side copies off: %d event fsyncs for %d cycles, want one per ack at least", evSyncs, n)
		}
	}
}

// TestSideCopyCodec: side copies and event metas decode as encoded, and
// damaged ones are refused with ErrCorruptState, never taken in part.
func TestSideCopyCodec(t *testing.T) {
	entries := []seglog.Entry{{Data: []byte("one")}, {Data: nil}, {Data: []byte("three")}}
	b := encodeSideCopy(nil, 41, entries)
	var got []string
	if err := decodeSideCopy(b, func(seq Seq, data []byte) { got = append(got, fmt.Sprintf("%d:%s", seq, data)) }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "41:one,42:,43:three" {
		t.Fatalf("decoded %v", got)
	}
	for name, bad := range map[string][]byte{
		"empty":         {},
		"version":       append([]byte{9}, b[1:]...),
		"truncated":     b[:len(b)-1],
		"trailing":      append(append([]byte{}, b...), 0),
		"first 0":       encodeSideCopy(nil, 0, entries),
		"count too big": {sideCopyV1, 1, 200},
	} {
		n := 0
		if err := decodeSideCopy(bad, func(Seq, []byte) { n++ }); !errors.Is(err, ErrCorruptState) {
			t.Errorf("%s: %v, want ErrCorruptState", name, err)
		}
	}
	if pos, ok := decodeEventMeta(encodeEventMeta(nil, 1234)); !ok || pos != 1234 {
		t.Fatalf("event meta: %d %v", pos, ok)
	}
	if _, ok := decodeEventMeta(nil); ok {
		t.Fatal("an event record without meta names a side copy position")
	}
}

var _ = context.Background

// TestPowerCutAfterGapsInSideCopies: rounds whose side copy could not be
// written (no room left in the data segment; injected here for every 4th
// copy) wait for the event fsync, and the copies after such a gap count
// again once it is durable. A stream of publishes, deliveries and acks
// with such gaps, then a power cut with the event log unsynced: every
// acked message stays acked.
func TestPowerCutAfterGapsInSideCopies(t *testing.T) {
	const n = 3000
	body := strings.Repeat("x", 100)
	c := &powerCutEnv{testEnv: &testEnv{t: t, dir: t.TempDir()}, dataFS: crashfs.New(seglog.OSFS()), evFS: crashfs.New(seglog.OSFS()), refuseEvery: 4}
	c.start()
	t.Cleanup(func() { c.b.Close() })
	tp := c.topic("q", TopicConfig{})
	g := c.group(tp, "w", GroupConfig{DeadLetter: "-"})
	ev0, _ := c.evFS.SyncCounts()
	errs := make(chan error, n)
	go func() {
		for i := 0; i < n; i++ {
			if err := tp.PublishAsync(Message{Subject: "q", Data: []byte(fmt.Sprint(i, body))}, func(_ Position, err error) {
				if err != nil {
					errs <- err
				}
			}); err != nil {
				errs <- err
				return
			}
		}
	}()
	acked := make(chan error, n)
	for got := 0; got < n; {
		for _, d := range c.poll(g, 20) {
			if err := c.b.Settle(d.Handle, Ack(), func(err error) { acked <- err }); err != nil {
				t.Fatal(err)
			}
			got++
		}
	}
	for i := 0; i < n; i++ {
		select {
		case err := <-acked:
			if err != nil {
				t.Fatalf("ack: %v", err)
			}
		case err := <-errs:
			t.Fatalf("publish: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d acks answered", i, n)
		}
	}
	ev1, _ := c.evFS.SyncCounts()
	data, _ := c.dataFS.SyncCounts()
	t.Logf("%d event fsyncs, %d data fsyncs, %d side copies refused, for %d messages", ev1-ev0, data, c.refused.Load(), n)
	if c.refused.Load() < 3 {
		t.Fatalf("only %d side copies refused: the test wants gaps", c.refused.Load())
	}
	c.powerCut()
	tp, _ = c.b.Topic("q")
	g, _ = tp.FindGroup("w")
	if ds := c.pollNow(g, 100, 2); len(ds) > 0 {
		t.Fatalf("after the power cut %d acked messages were delivered again (first %q)", len(ds), ds[0].Data[:min(8, len(ds[0].Data))])
	}
}

// TestSideChainJoinsAfterAGap: the run of side copies counts once it
// starts at or below the event log's durable end, including the copies
// written while the event fsync that got it there ran. Regression: a copy
// used to count only if it followed the last counted one, so the copies
// written during that fsync (after a gap, or after the first event fsync
// since Open) never counted and neither did any after them: under a
// steady stream every round asked for an event fsync again.
func TestSideChainJoinsAfterAGap(t *testing.T) {
	c := sideChain{from: 101, top: 100} // Open: the event log durable to 100
	c.add(101, 105)
	if got := c.covered(100); got != 105 {
		t.Fatalf("unbroken run from the durable end: covered %d, want 105", got)
	}
	// events 106..110: their copy was refused; 111..115 and 116..120
	// were copied while the event fsync for 110 ran
	c.add(111, 115)
	c.add(116, 120)
	for _, tc := range []struct{ durable, want Seq }{
		{105, 105}, // the gap is durable nowhere: the run after it does not count
		{109, 109},
		{110, 120}, // the event fsync covered the gap: the run joins
		{113, 120},
		{125, 125},
	} {
		if got := c.covered(tc.durable); got != tc.want {
			t.Errorf("event log durable to %d: covered %d, want %d", tc.durable, got, tc.want)
		}
	}
}

// fakeSideStore is a data log's side records for sideCopies' tests: each
// AppendSide returns the next mark, or fails with err.
type fakeSideStore struct {
	seglog.Store
	marks uint64
	err   error
	got   [][]byte
}

func (f *fakeSideStore) AppendSide(e seglog.Entry) (uint64, error) {
	if f.err != nil {
		return 0, f.err
	}
	f.marks++
	f.got = append(f.got, append([]byte(nil), e.Data...))
	return f.marks, nil
}

func evEntries(n int) []seglog.Entry {
	es := make([]seglog.Entry, n)
	for i := range es {
		es[i].Data = []byte{byte(i)}
	}
	return es
}

// TestSideCopies: copies count only once a durable event record names
// where they start, a failed copy breaks the run and is reported once
// until one succeeds (ErrSideNoRoom never), the positions of copies whose
// events are not durable in the event log bound retention, and the event
// meta names the copy's position.
func TestSideCopies(t *testing.T) {
	var off sideCopies
	if off.on() || off.eventMeta(7) != nil || off.covered(3) != 3 {
		t.Fatal("side copies off: want no meta and the event log's durable end")
	}

	st := &fakeSideStore{}
	var s sideCopies
	s.open(st, false, 10) // the event log durable to 10, naming no position yet
	if m := s.eventMeta(50); func() Seq { pos, _ := decodeEventMeta(m); return pos }() != 50 {
		t.Fatalf("event meta %x does not name position 50", m)
	}
	if err := s.write(11, evEntries(3), 50, 1); err != nil {
		t.Fatal(err)
	}
	if s.mark != 1 || len(st.got) != 1 {
		t.Fatalf("mark %d after one copy", s.mark)
	}
	if got := s.covered(10); got != 10 {
		t.Fatalf("before a durable record names the copies: covered %d, want 10", got)
	}
	if cut, clamped := s.keep(60); !clamped || cut != 49 {
		t.Fatalf("keep(60) = %d, %v; want 49, true (the copy at 50 is needed)", cut, clamped)
	}
	s.eventsDurable(11) // the first record written since Open is durable
	if !s.ready {
		t.Fatal("not ready once the event log has the first record durable")
	}
	if got := s.covered(11); got != 13 {
		t.Fatalf("covered %d, want 13 (the copy holds 11..13)", got)
	}
	if cut, clamped := s.keep(60); !clamped || cut != 49 {
		t.Fatalf("events 12..13 not durable in the event log: keep(60) = %d, %v", cut, clamped)
	}

	st.err = errors.New("disk on fire")
	if err := s.write(14, evEntries(2), 51, 2); err == nil {
		t.Fatal("the first failed copy was not reported")
	}
	if err := s.write(16, evEntries(2), 52, 3); err != nil {
		t.Fatal("a failed copy reported twice")
	}
	st.err = nil
	if err := s.write(18, evEntries(2), 53, 4); err != nil {
		t.Fatal(err)
	}
	if got := s.covered(11); got != 11 {
		t.Fatalf("after a gap at 14..17 the chain is the run from 18: covered %d, want the event log's 11", got)
	}
	st.err = errors.New("disk on fire again")
	if err := s.write(20, evEntries(1), 54, 5); err == nil {
		t.Fatal("a failure after a success was not reported")
	}
	st.err = fmt.Errorf("wrapped: %w", seglog.ErrSideNoRoom)
	s.failed = false
	if err := s.write(21, evEntries(1), 55, 6); err != nil {
		t.Fatalf("ErrSideNoRoom reported: %v", err)
	}
	s.eventsDurable(17) // the event fsync covered the gap
	if got := s.covered(17); got != 19 {
		t.Fatalf("gap durable: covered %d, want 19", got)
	}
	if cut, clamped := s.keep(60); !clamped || cut != 52 {
		t.Fatalf("keep(60) = %d, %v; want 52 (the copy at 53 holds events not durable in the event log)", cut, clamped)
	}
	s.eventsDurable(21)
	if cut, clamped := s.keep(60); clamped || cut != 60 {
		t.Fatalf("every event durable: keep(60) = %d, %v", cut, clamped)
	}
}
