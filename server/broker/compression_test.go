package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// dirNames lists the names in dir that keep accepts.
func dirNames(t *testing.T, dir string, keep func(string) bool) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	var out []string
	for _, e := range ents {
		if keep(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// compressedFiles lists the compressed segment files (.seg.s2, .seg.zst) in
// one log directory.
func compressedFiles(t *testing.T, dir string) []string {
	t.Helper()
	return dirNames(t, dir, func(n string) bool { return strings.HasSuffix(n, ".seg.s2") || strings.HasSuffix(n, ".seg.zst") })
}

// compressible is a JSON-like payload of about 1 KiB, different for each i.
func compressible(i int) string {
	var sb strings.Builder
	for sb.Len() < 1000 {
		fmt.Fprintf(&sb, `{"order":%d,"customer":"acme-%d","status":"pending","items":[1,2,3]}`, i, i%7)
	}
	return sb.String()
}

// publishAll publishes the messages asynchronously and waits for every
// confirm, so many publishes share an fsync.
func publishAll(t *testing.T, tp *Topic, msgs []string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(msgs))
	for _, m := range msgs {
		wg.Add(1)
		err := tp.PublishAsync(Message{Subject: string(tp.Name()), Data: []byte(m)}, func(_ Position, err error) {
			if err != nil {
				errs <- err
			}
			wg.Done()
		})
		if err != nil {
			t.Fatalf("PublishAsync: %v", err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("publish: %v", err)
	}
}

// pollAll polls g until n deliveries arrived and returns their data in
// order.
func pollAll(e *testEnv, g *Group, n int) []string {
	e.t.Helper()
	var got []string
	for len(got) < n {
		ds := e.poll(g, n-len(got))
		if len(ds) == 0 {
			e.t.Fatalf("poll returned nothing after %d of %d", len(got), n)
		}
		got = append(got, datas(ds)...)
	}
	return got
}

func TestTopicCompressionWritesCompressedSegments(t *testing.T) {
	for _, tc := range []struct {
		codec Compression
		ext   string
	}{
		{CompressionS2, ".seg.s2"},
		{CompressionZstd, ".seg.zst"},
	} {
		t.Run(string(tc.codec), func(t *testing.T) {
			e := newEnv(t, nil) // 64 KiB segments
			tp := e.topic("c", TopicConfig{Compression: tc.codec})
			if got := tp.Config().Compression; got != tc.codec {
				t.Fatalf("Config().Compression = %q, want %q", got, tc.codec)
			}
			msgs := make([]string, 300) // ~300 KiB: several sealed segments
			for i := range msgs {
				msgs[i] = compressible(i)
			}
			publishAll(t, tp, msgs)

			pdir := filepath.Join(e.b.topicDir(tp.ID()), "0")
			dataDir := filepath.Join(pdir, dataLogName)
			waitFor(t, "a compressed sealed segment", func() bool { return len(compressedFiles(t, dataDir)) >= 2 })
			for _, f := range compressedFiles(t, dataDir) {
				if !strings.HasSuffix(f, tc.ext) {
					t.Errorf("compressed file %s, want suffix %s", f, tc.ext)
				}
			}
			if ev := compressedFiles(t, filepath.Join(pdir, eventsLogName)); len(ev) != 0 {
				t.Errorf("event log has compressed segments %v", ev)
			}

			e.restart()
			tp, ok := e.b.Topic("c")
			if !ok {
				t.Fatal("topic gone after restart")
			}
			if got := tp.Config().Compression; got != tc.codec {
				t.Fatalf("after restart Config().Compression = %q, want %q", got, tc.codec)
			}
			if len(compressedFiles(t, dataDir)) < 2 {
				t.Fatalf("compressed segments gone after restart")
			}
			g := e.group(tp, "g", GroupConfig{})
			got := pollAll(e, g, len(msgs))
			for i := range msgs {
				if got[i] != msgs[i] {
					t.Fatalf("message %d after restart: got %d bytes %.40q, want %.40q", i, len(got[i]), got[i], msgs[i])
				}
			}
		})
	}
}

func TestTopicCompressionNoneStaysPlain(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("p", TopicConfig{})
	if got := tp.Config().Compression; got != CompressionNone {
		t.Fatalf("default Compression = %q, want none", got)
	}
	msgs := make([]string, 300)
	for i := range msgs {
		msgs[i] = compressible(i)
	}
	publishAll(t, tp, msgs)
	dataDir := filepath.Join(e.b.topicDir(tp.ID()), "0", dataLogName)
	e.restart() // Close waits for any compression under way
	if c := compressedFiles(t, dataDir); len(c) != 0 {
		t.Fatalf("topic without compression has compressed segments %v", c)
	}
}

func TestTopicCompressionInvalid(t *testing.T) {
	e := newEnv(t, nil)
	for _, v := range []Compression{"lz4", "S2", "gzip", " none"} {
		_, err := e.b.CreateTopic("bad", TopicConfig{Compression: v})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("compression %q: err = %v, want ErrInvalid", v, err)
			continue
		}
		if !strings.Contains(err.Error(), "compression") {
			t.Errorf("compression %q: error %q does not name the field", v, err)
		}
		if _, ok := e.b.Topic("bad"); ok {
			t.Fatalf("compression %q: topic created anyway", v)
		}
	}
}

// TestCatalogWithoutCompressionOpens: a catalog written before the field
// existed opens, its topics read as compression none, and creating such a
// topic again with the default configuration is still the same topic.
func TestCatalogWithoutCompressionOpens(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("old", TopicConfig{Retention: RetentionLimits})
	e.publish(tp, "before")
	rewriteCatalog(t, e, func(raw []byte) []byte {
		var cat map[string]any
		if err := json.Unmarshal(raw, &cat); err != nil {
			t.Fatal(err)
		}
		topics := cat["topics"].([]any)
		for _, ct := range topics {
			cfg := ct.(map[string]any)["config"].(map[string]any)
			if _, ok := cfg["compression"]; !ok {
				t.Fatalf("new catalog lacks compression: %s", raw)
			}
			delete(cfg, "compression")
		}
		old, err := json.Marshal(cat)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(old), "compression") {
			t.Fatalf("old catalog still names compression: %s", old)
		}
		return old
	})

	e.open()
	tp, ok := e.b.Topic("old")
	if !ok {
		t.Fatal("topic missing after opening the old catalog")
	}
	if got := tp.Config().Compression; got != CompressionNone {
		t.Fatalf("Compression = %q, want none", got)
	}
	want, err := TopicConfig{Retention: RetentionLimits}.Resolve("old")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, tp.Config()) {
		t.Fatalf("Config() = %+v, want %+v (idempotent create would fail)", tp.Config(), want)
	}
	g := e.group(tp, "g", GroupConfig{})
	if got := datas(e.poll(g, 10)); !reflect.DeepEqual(got, []string{"before"}) {
		t.Fatalf("messages = %q", got)
	}
}

func TestCatalogUnknownCompressionRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.topic("x", TopicConfig{})
	rewriteCatalog(t, e, func(raw []byte) []byte {
		bad := strings.Replace(string(raw), `"compression": "none"`, `"compression": "lz4"`, 1)
		if bad == string(raw) {
			t.Fatalf("catalog has no compression to damage: %s", raw)
		}
		return []byte(bad)
	})
	if b, err := Open(e.dir, e.opts()); !errors.Is(err, ErrCorruptCatalog) {
		if b != nil {
			b.Close()
		}
		t.Fatalf("Open with compression lz4 in the catalog: %v, want ErrCorruptCatalog", err)
	}
}

// rewriteCatalog closes e's broker and replaces its catalog file with what
// edit makes of its body, written as a catalog of an earlier version
// (format 1: the body alone, no seal).
func rewriteCatalog(t *testing.T, e *testEnv, edit func(raw []byte) []byte) {
	t.Helper()
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	e.b = nil
	path := filepath.Join(e.dir, catalogName)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Body json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(raw, &f); err != nil || f.Body == nil {
		t.Fatalf("catalog is not sealed: %v: %s", err, raw)
	}
	if err := os.WriteFile(path, edit(f.Body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// trashFiles counts the trash files (deleted segments waiting for their
// maps to go) in one log directory.
func trashFiles(t *testing.T, dir string) int {
	t.Helper()
	return len(dirNames(t, dir, func(n string) bool { return strings.Contains(n, ".trash") }))
}

// TestCompressedTopicReleasesReplacedMaps: a compressed topic's data log
// keeps the old map (and file) of each segment it compressed until the
// partition knows no delivery borrows from it, since a delivery waiting for
// its fsync points into the map it was read from; once every delivery is
// answered, the maps and their files go while the broker runs.
func TestCompressedTopicReleasesReplacedMaps(t *testing.T) {
	e := newEnv(t, nil) // 64 KiB segments
	tp := e.topic("c", TopicConfig{Compression: CompressionS2})
	g := e.group(tp, "g", GroupConfig{})
	msgs := make([]string, 300)
	for i := range msgs {
		msgs[i] = compressible(i)
	}
	publishAll(t, tp, msgs)
	got := pollAll(e, g, 100) // deliveries read from plain maps, some before their swap
	for i := range got {
		if got[i] != msgs[i] {
			t.Fatalf("message %d: got %.40q", i, got[i])
		}
	}
	dataDir := filepath.Join(e.b.topicDir(tp.ID()), "0", dataLogName)
	waitForUpTo(t, 30*time.Second, "compressed segments", func() bool { return len(compressedFiles(t, dataDir)) >= 2 })
	// Rounds after the compressor's replacements (here the lease timers'
	// and retention's) release the maps no delivery borrows. Both waits are
	// on background work a loaded machine delays (this test used to fail
	// at 5 s under load, never for want of the release).
	waitForUpTo(t, 30*time.Second, "the replaced segments' files to go", func() bool { return trashFiles(t, dataDir) == 0 })
	if _, err := g.InfoCurrent(context.Background()); err != nil {
		t.Fatal(err)
	}
	rest := pollAll(e, g, len(msgs)-100)
	for i := range rest {
		if rest[i] != msgs[100+i] {
			t.Fatalf("message %d: got %.40q", 100+i, rest[i])
		}
	}
}

// swapCounter is a test store's view of a compressed log's replacements:
// it records what the partition releases.
type swapCounter struct {
	count    uint64
	released []uint64
}

func (s *swapCounter) SwapCount() uint64       { return s.count }
func (s *swapCounter) ReleaseSwapped(n uint64) { s.released = append(s.released, n) }

// TestReleaseSwappedWaitsForBorrowers: the partition releases replaced
// maps only up to the lowest replacement count noted by a pending batch
// with deliveries or a collecting poll (they may point into later ones),
// everything once nothing borrows, and never the same count twice.
func TestReleaseSwappedWaitsForBorrowers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		count      uint64
		pending    []syncBatch
		collecting []*pollWaiter
		want       []uint64
	}{
		{"nothing borrowed", 3, nil, nil, []uint64{3}},
		{"a batch with deliveries", 3, []syncBatch{{minDeliv: 7, swap: 1}}, nil, []uint64{1}},
		{"a batch without deliveries does not hold", 3, []syncBatch{{swap: 0}}, nil, []uint64{3}},
		{"the lowest of several", 5, []syncBatch{{minDeliv: 9, swap: 4}, {minDeliv: 12, swap: 2}}, nil, []uint64{2}},
		{"a collecting poll", 4, []syncBatch{{minDeliv: 9, swap: 3}}, []*pollWaiter{{lowBorrowed: 8, swap: 1}}, []uint64{1}},
		{"borrowers from before any swap", 2, []syncBatch{{minDeliv: 1, swap: 0}}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := &swapCounter{count: tc.count}
			p := &partition{swaps: swapGuard{log: sc}, commit: commitPipeline{pending: tc.pending, collecting: tc.collecting}}
			p.releaseSwapped()
			p.releaseSwapped() // nothing new: no second call
			if fmt.Sprint(sc.released) != fmt.Sprint(tc.want) {
				t.Fatalf("released %v, want %v", sc.released, tc.want)
			}
			p.commit.pending, p.commit.collecting = nil, nil
			p.releaseSwapped()
			if n := len(sc.released); n == 0 || sc.released[n-1] != tc.count {
				t.Fatalf("after the borrowers finished: released %v, want %d last", sc.released, tc.count)
			}
		})
	}
}

// TestIdleCompressedPartitionReleasesReplacedMaps: the compressor replaces
// segments in the background, after the round that sealed them; with no
// group, no lease and no retention to run rounds, the partition's timer
// still looks for those replacements for a while after its last append,
// and releases their maps and files.
func TestIdleCompressedPartitionReleasesReplacedMaps(t *testing.T) {
	e := newEnvWith(t, func(o *Options) { o.RetentionInterval = 20 * time.Millisecond })
	tp := e.topic("idle", TopicConfig{Compression: CompressionS2, Retention: RetentionLimits})
	msgs := make([]string, 300)
	for i := range msgs {
		msgs[i] = compressible(i)
	}
	publishAll(t, tp, msgs)
	dataDir := filepath.Join(e.b.topicDir(tp.ID()), "0", dataLogName)
	waitFor(t, "compressed segments", func() bool { return len(compressedFiles(t, dataDir)) >= 2 })
	waitFor(t, "the replaced segments' files to go with no command", func() bool { return trashFiles(t, dataDir) == 0 })
}
