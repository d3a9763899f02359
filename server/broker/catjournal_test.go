package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// journalImage makes topics t0..t(n-1) (t1 with a paused group, t2
// deleted) on a broker whose catalog.json was written before them, and
// returns an image of its data directory taken while it runs, as a killed
// process leaves it.
func journalImage(t *testing.T, n int) (e *testEnv, image string) {
	t.Helper()
	e = newEnv(t, nil)
	e.topic("before", TopicConfig{})
	e.restart()
	catPath := filepath.Join(e.dir, catalogName)
	fiBefore, err := os.Stat(catPath)
	if err != nil {
		t.Fatal(err)
	}
	before := mustRead(t, catPath)
	for i := range n {
		tp := e.topic(TopicName(fmt.Sprintf("t%d", i)), TopicConfig{})
		if i == 1 {
			if err := e.group(tp, "g", GroupConfig{DeadLetter: "-"}).Pause(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.b.DeleteTopic("t2"); err != nil {
		t.Fatal(err)
	}
	fiAfter, err := os.Stat(catPath)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(fiBefore, fiAfter) || string(mustRead(t, catPath)) != string(before) {
		t.Fatal("a topic create rewrote catalog.json")
	}
	image = t.TempDir()
	copyTree(t, e.dir, image)
	return e, image
}

// wantJournalTopics checks that b serves what journalImage made.
func wantJournalTopics(t *testing.T, b *Broker, n int) {
	t.Helper()
	for i := range n {
		name := TopicName(fmt.Sprintf("t%d", i))
		tp, ok := b.Topic(name)
		if ok != (i != 2) {
			t.Fatalf("topic %s present: %v", name, ok)
		}
		if i == 1 {
			g, ok := tp.FindGroup("g")
			if !ok || !g.Paused() {
				t.Fatalf("t1's group: found %v, paused %v", ok, ok && g.Paused())
			}
		}
	}
	if _, ok := b.Topic("before"); !ok {
		t.Fatal("topic before lost")
	}
}

// TestCatalogJournalKeepsChanges: topic and group changes append to the
// journal (catalog.json untouched), a process killed after them loses
// none, and the Open after folds them into catalog.json.
func TestCatalogJournalKeepsChanges(t *testing.T) {
	const n = 12
	e, image := journalImage(t, n)
	b, err := Open(image, e.opts())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	wantJournalTopics(t, b, n)
	c, _, err := decodeCatalog(mustRead(t, filepath.Join(image, catalogName)))
	if err != nil || len(c.Topics) != n {
		t.Fatalf("catalog.json after the Open: %d topics, %v; want %d folded in", len(c.Topics), err, n)
	}
	if j := mustRead(t, filepath.Join(image, journalName)); len(j) != journalHeaderLen {
		t.Fatalf("journal after the fold: %d bytes", len(j))
	}
}

// TestCatalogJournalIndexMarkAfterKill: the replicated catalog's mark of
// an applied index is a journal record naming no topic; a process killed
// after it (the journal not folded) opens again with the index kept.
// Before, the Open refused the journal ("a change names no topic or
// two"), so a cluster node killed once never started again.
func TestCatalogJournalIndexMarkAfterKill(t *testing.T) {
	e := newEnv(t, nil)
	e.topic("t", TopicConfig{})
	if err := e.b.markIndex(7); err != nil {
		t.Fatal(err)
	}
	image := t.TempDir()
	copyTree(t, e.dir, image)
	b, err := Open(image, e.opts())
	if err != nil {
		t.Fatalf("open after a kill with an index mark in the journal: %v", err)
	}
	defer b.Close()
	if got := b.CatalogIndex(); got != 7 {
		t.Fatalf("CatalogIndex after the kill: %d, want 7", got)
	}
	if _, ok := b.Topic("t"); !ok {
		t.Fatal("topic t lost")
	}
}

// TestCatalogJournalDamage: damage to a change the journal made durable,
// or a missing journal, refuses the Open with ErrCorruptCatalog naming
// the journal (Verify reports it, Repair rebuilds every topic from its
// topic.json); a torn tail past the durable point is a change never
// answered and the Open goes ahead.
func TestCatalogJournalDamage(t *testing.T) {
	const n = 6
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, b []byte) []byte // nil: delete the file
		refused bool
	}{
		{"flipped bit in a record", func(t *testing.T, b []byte) []byte { b[journalHeaderLen+20] ^= 4; return b }, true},
		{"flipped bit in a length", func(t *testing.T, b []byte) []byte { b[journalHeaderLen+1] ^= 1; return b }, true},
		{"truncated", func(t *testing.T, b []byte) []byte { return b[:len(b)-10] }, true},
		{"truncated to the header", func(t *testing.T, b []byte) []byte { return b[:journalHeaderLen] }, true},
		{"damaged header", func(t *testing.T, b []byte) []byte { b[9] ^= 1; return b }, true},
		{"missing", nil, true},
		{"torn tail", func(t *testing.T, b []byte) []byte {
			rec := binary.LittleEndian.AppendUint32(nil, 100)
			return append(append(b, rec...), "{\"next_t"...)
		}, false},
		{"zeroed tail", func(t *testing.T, b []byte) []byte { return append(b, make([]byte, 4096)...) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, image := journalImage(t, n)
			path := filepath.Join(image, journalName)
			if tc.damage == nil {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, tc.damage(t, mustRead(t, path)), 0o644); err != nil {
				t.Fatal(err)
			}
			b, err := Open(image, e.opts())
			if !tc.refused {
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				wantJournalTopics(t, b, n)
				return
			}
			if err == nil {
				b.Close()
				t.Fatal("Open took a damaged journal")
			}
			if !errors.Is(err, ErrCorruptCatalog) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open: %v; want ErrCorruptCatalog naming %s", err, path)
			}
			rep, err := Verify(image, e.opts())
			if err != nil || rep.Count(FindingCatalog) == 0 {
				t.Fatalf("Verify: %v, %+v; want a catalog finding", err, rep.Findings)
			}
			if _, err := Repair(image, RepairOptions{Engine: e.opts()}); err != nil {
				t.Fatal(err)
			}
			b, err = Open(image, e.opts())
			if err != nil {
				t.Fatalf("Open after Repair: %v", err)
			}
			defer b.Close()
			wantJournalTopics(t, b, n)
		})
	}
}

// TestCatalogFoldKeepsPrevious: a fold writes every change into
// catalog.json, keeps the copy it replaced and empties the journal; the
// next changes go to the new journal.
func TestCatalogFoldKeepsPrevious(t *testing.T) {
	e := newEnv(t, nil)
	e.topic("a", TopicConfig{})
	e.restart()
	e.topic("b", TopicConfig{})
	e.b.mu.Lock()
	err := e.b.foldCatalog()
	e.b.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if j := mustRead(t, filepath.Join(e.dir, journalName)); len(j) != journalHeaderLen {
		t.Fatalf("journal after the fold: %d bytes", len(j))
	}
	prev, _, err := decodeCatalog(mustRead(t, filepath.Join(e.dir, catalogPrevName)))
	if err != nil || len(prev.Topics) != 1 {
		t.Fatalf("previous copy: %+v, %v; want topic a alone", prev, err)
	}
	e.topic("c", TopicConfig{})
	image := t.TempDir()
	copyTree(t, e.dir, image)
	b, err := Open(image, e.opts())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, name := range []TopicName{"a", "b", "c"} {
		if _, ok := b.Topic(name); !ok {
			t.Fatalf("topic %s lost", name)
		}
	}
}

// TestConcurrentCreates: creates of the same names from several
// goroutines at once (they run in parallel, sharing the journal's fsyncs)
// create each name once, with distinct ids; a filter overlapping one being
// created is refused; every topic survives a restart.
func TestConcurrentCreates(t *testing.T) {
	e := newEnv(t, nil)
	const names, workers = 40, 6
	var mu sync.Mutex
	won := map[TopicName]TopicID{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range names {
				name := TopicName(fmt.Sprintf("c%d", (i+w*7)%names))
				tp, err := e.b.CreateTopic(name, TopicConfig{})
				switch {
				case errors.Is(err, ErrTopicExists):
				case err != nil:
					errs <- err
					return
				default:
					mu.Lock()
					if _, dup := won[name]; dup {
						errs <- fmt.Errorf("%s created twice", name)
					}
					won[name] = tp.id
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ids := map[TopicID]bool{}
	for name, id := range won {
		if ids[id] {
			t.Fatalf("id %d given twice (%s)", id, name)
		}
		ids[id] = true
	}
	if len(won) != names {
		t.Fatalf("%d topics created, want %d", len(won), names)
	}
	e.b.mu.Lock()
	e.b.pending = map[TopicName][]string{"busy": {"busy.>"}}
	e.b.mu.Unlock()
	if _, err := e.b.CreateTopic("other", TopicConfig{Subjects: []string{"busy.x"}}); !errors.Is(err, ErrOverlap) {
		t.Fatalf("a filter under one being created: %v, want ErrOverlap", err)
	}
	e.b.mu.Lock()
	e.b.pending = nil
	e.b.mu.Unlock()
	e.restart()
	for name, id := range won {
		if tp, ok := e.b.Topic(name); !ok || tp.id != id {
			t.Fatalf("topic %s after the restart: %v", name, ok)
		}
	}
}
