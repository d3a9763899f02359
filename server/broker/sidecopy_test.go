package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
)

// powerCutEnv is a broker on file logs whose writes go through FaultFS
// (one for the data logs, one for the event logs), so a test can cut the
// power: every write never fsynced is lost, the page cache with it.
type powerCutEnv struct {
	*testEnv
	dataFS, evFS *seglog.FaultFS
	noSide       bool
	mu           sync.Mutex
	logs         []*seglog.Log
	logged       []string
}

func newPowerCutEnv(t *testing.T, noSide bool) *powerCutEnv {
	t.Helper()
	c := &powerCutEnv{testEnv: &testEnv{t: t, dir: t.TempDir()}, dataFS: seglog.NewFaultFS(), evFS: seglog.NewFaultFS(), noSide: noSide}
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
	o.eventSyncEvery = time.Hour // no background event fsync: the test decides what is synced
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
		if err == nil {
			c.mu.Lock()
			c.logs = append(c.logs, l)
			c.mu.Unlock()
		}
		return l, err
	}
	b, err := Open(c.dir, o)
	if err != nil {
		c.t.Fatalf("Open: %v", err)
	}
	c.b = b
}

// powerCut drops the logs as if the machine died, loses every write not
// fsynced, and opens the broker again.
func (c *powerCutEnv) powerCut() {
	c.t.Helper()
	c.mu.Lock()
	for _, l := range c.logs {
		l.Abandon()
	}
	c.logs = nil
	c.mu.Unlock()
	c.b.Close() // the logs are gone: no snapshot, no clean marker
	c.b = nil
	for _, fs := range []*seglog.FaultFS{c.dataFS, c.evFS} {
		if _, err := fs.Crash(nil, seglog.CrashDropAll); err != nil {
			c.t.Fatal(err)
		}
	}
	c.start()
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
