package broker

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fibrilmq/fibril/server/seglog"
)

// TestTornTailCutIsLogged: a data log whose recovery cut a torn tail (a
// record written but never fsynced, half on disk) opens, keeps every
// confirmed message, and says so in the broker's log.
func TestTornTailCutIsLogged(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("jobs", TopicConfig{})
	for i := range 5 {
		e.publish(tp, fmt.Sprint("m", i))
	}
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	e.b = nil
	dirs, _ := filepath.Glob(filepath.Join(e.dir, "topics", "*", "0", dataLogName))
	if len(dirs) != 1 {
		t.Fatalf("data logs: %v", dirs)
	}
	// A sixth record, written and never synced (PolicyNone, then a crash),
	// torn in half on disk.
	l, err := seglog.Open(dirs[0], seglog.Options{Policy: seglog.PolicyNone, SegmentSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([]seglog.Entry{{Data: bytes.Repeat([]byte("x"), 500)}}); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	act := segs[len(segs)-1]
	l.Abandon()
	path := filepath.Join(dirs[0], fmt.Sprintf("%020d.seg", act.First))
	end := act.Bytes + 32 // the segment header
	if err := os.Truncate(path, end-268); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, act.Allocated); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	o := e.opts()
	o.Logf = func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	b, err := Open(e.dir, o)
	if err != nil {
		t.Fatalf("open after the torn write: %v", err)
	}
	e.b = b
	mu.Lock()
	logged := strings.Join(lines, "\n")
	mu.Unlock()
	if !strings.Contains(logged, "recovery cut a torn tail") || !strings.Contains(logged, "topic jobs") {
		t.Fatalf("broker log says nothing of the cut:\n%s", logged)
	}
	g := e.group(e.topic("jobs", TopicConfig{}), "w", GroupConfig{})
	if got := datas(e.poll(g, 10)); strings.Join(got, ",") != "m0,m1,m2,m3,m4" {
		t.Fatalf("after recovery: %v", got)
	}
}

// wrappedStore is a custom store that embeds the file log to change one
// thing (here nothing), as an OpenStore of a user's would.
type wrappedStore struct{ seglog.Store }

// TestWrappedStoreKeepsCapabilities: a StoreOpener that wraps the file log
// keeps its side records and its held-map release, because both are
// methods of seglog.Store; they used to be found by type assertion on the
// concrete log, so the wrapper silently turned side copies off (each
// commit then waited for the event log's fsync too) and never released a
// compressed topic's old maps. A store without side records (the test
// stores) says so and gets none.
func TestWrappedStoreKeepsCapabilities(t *testing.T) {
	e := newEnvWith(t, func(o *Options) {
		o.OpenStore = func(dir string, policy seglog.Policy) (seglog.Store, error) {
			l, err := seglog.Open(dir, seglog.Options{Policy: policy, SegmentSize: 64 << 10, HoldSwapped: true, Compression: seglog.CompressionS2})
			if err != nil {
				return nil, err
			}
			return wrappedStore{l}, nil
		}
	})
	tp := e.topic("q", TopicConfig{Compression: CompressionS2})
	e.publish(tp, "a")
	type caps struct{ side, swaps bool }
	got := make(chan caps, 1)
	if err := tp.parts[0].controlChecked(func(p *partition) { got <- caps{p.side.on(), p.swaps.log != nil} }); err != nil {
		t.Fatal(err)
	}
	if c := <-got; !c.side || !c.swaps {
		t.Fatalf("wrapped file log: side copies %v, swap release %v; want both", c.side, c.swaps)
	}

	m := newMemEnv(t, nil)
	mp := m.topic("q", TopicConfig{})
	m.publish(mp, "a")
	if err := mp.parts[0].controlChecked(func(p *partition) { got <- caps{p.side.on(), p.swaps.log != nil} }); err != nil {
		t.Fatal(err)
	}
	if c := <-got; c.side {
		t.Fatal("side copies on a store without side records")
	}
}

// TestLogsOpenedCallerSyncedUnderGroupAndSync: the partition owns fsync
// under durability group and sync, so it opens both logs with
// seglog.PolicyCaller (no fsync inside Append, no background fsync beside
// its own); under none with seglog.PolicyNone (the background fsync nobody
// waits for). Before, group got PolicyNone, whose background fsync could
// run beside the lanes, and sync got PolicySync.
func TestLogsOpenedCallerSyncedUnderGroupAndSync(t *testing.T) {
	var mu sync.Mutex
	got := map[string]seglog.Policy{}
	e := newEnvWith(t, func(o *Options) {
		o.OpenStore = func(dir string, policy seglog.Policy) (seglog.Store, error) {
			mu.Lock()
			got[dir] = policy
			mu.Unlock()
			return seglog.NewMemStore(), nil
		}
	})
	for d, want := range map[Durability]seglog.Policy{DurabilityGroup: seglog.PolicyCaller, DurabilitySync: seglog.PolicyCaller, DurabilityNone: seglog.PolicyNone} {
		tp := e.topic(TopicName("t-"+string(d)), TopicConfig{Durability: d})
		for _, log := range []string{dataLogName, eventsLogName} {
			mu.Lock()
			p, ok := got[filepath.Join(tp.dir, "0", log)]
			mu.Unlock()
			if !ok || p != want {
				t.Errorf("durability %s: %s log opened with %v (found %v), want %v", d, log, p, ok, want)
			}
		}
	}
}
