package broker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCatalogEditRefused is the regression test for "a one-letter change to
// catalog.json is taken silently": "id" → "it" made a group's id 0 (4,259
// acked messages redelivered), "lease_ms" → "leese_ms" made the lease 0.
// Now the catalog carries a checksum and is decoded strictly: any edit,
// even one that keeps the checksum right, refuses the Open with
// ErrCorruptCatalog naming the file and the previous copy.
func TestCatalogEditRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, raw []byte) []byte
	}{
		{"id to it", func(t *testing.T, raw []byte) []byte { return replaceOnce(t, raw, `"id": 1,`, `"it": 1,`) }},
		{"lease value", func(t *testing.T, raw []byte) []byte {
			return replaceOnce(t, raw, `"lease_ms": 30000`, `"lease_ms": 3000`)
		}},
		{"unknown key resealed", func(t *testing.T, raw []byte) []byte {
			return reseal(t, replaceOnce(t, body(t, raw), `"lease_ms": 30000`, `"leese_ms": 30000`))
		}},
		{"legacy unknown key", func(t *testing.T, raw []byte) []byte {
			return replaceOnce(t, body(t, raw), `"lease_ms": 30000`, `"leese_ms": 30000`)
		}},
		{"zero lease resealed", func(t *testing.T, raw []byte) []byte {
			return reseal(t, replaceOnce(t, body(t, raw), `"lease_ms": 30000`, `"lease_ms": 0`))
		}},
		{"group id above the counter", func(t *testing.T, raw []byte) []byte {
			return reseal(t, replaceOnce(t, body(t, raw), `"next_group_id": 2`, `"next_group_id": 1`))
		}},
		{"truncated", func(t *testing.T, raw []byte) []byte { return raw[:len(raw)/2] }},
		{"empty", func(t *testing.T, raw []byte) []byte { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			tp := e.topic("orders", TopicConfig{})
			e.group(tp, "billing", GroupConfig{DeadLetter: "-"})
			if err := e.b.Close(); err != nil {
				t.Fatal(err)
			}
			e.b = nil
			path := filepath.Join(e.dir, catalogName)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tc.edit(t, raw), 0o644); err != nil {
				t.Fatal(err)
			}
			b, err := Open(e.dir, e.opts())
			if err == nil {
				b.Close()
				t.Fatal("Open took an edited catalog")
			}
			if !errors.Is(err, ErrCorruptCatalog) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "fibril repair") {
				t.Fatalf("Open: %v; want ErrCorruptCatalog naming %s and fibril repair", err, path)
			}
		})
	}
}

func replaceOnce(t *testing.T, raw []byte, old, new string) []byte {
	t.Helper()
	if !strings.Contains(string(raw), old) {
		t.Fatalf("%q not in %s", old, raw)
	}
	return []byte(strings.Replace(string(raw), old, new, 1))
}

// body returns the body of a sealed file.
func body(t *testing.T, raw []byte) []byte {
	t.Helper()
	var c catalog
	if _, err := unseal(raw, &c); err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(raw), `"body":`)
	return raw[i+len(`"body":`) : len(raw)-2]
}

// reseal seals edited body bytes with a checksum that matches them.
func reseal(t *testing.T, b []byte) []byte {
	t.Helper()
	var c map[string]any
	if err := decodeStrict(b, &c); err != nil {
		t.Fatal(err)
	}
	out, err := seal(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMissingCatalogRefused is the regression test for "a missing catalog
// destroys data": the broker started with no topics and the next TOPIC
// CREATE reused id 1 and removed topics/1 with everything in it. Now Open
// refuses, naming the directories that hold data and the previous copy;
// a new data directory (no topic holds data) still opens.
func TestMissingCatalogRefused(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("orders", TopicConfig{})
	e.publish(tp, "keep me")
	e.topic("other", TopicConfig{}) // a second save: catalog.json.prev exists
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	e.b = nil
	if err := os.Remove(filepath.Join(e.dir, catalogName)); err != nil {
		t.Fatal(err)
	}
	_, err := Open(e.dir, e.opts())
	if !errors.Is(err, ErrCorruptCatalog) || !strings.Contains(err.Error(), filepath.Join(e.dir, "topics", "1")) ||
		!strings.Contains(err.Error(), catalogPrevName) {
		t.Fatalf("Open without its catalog: %v; want ErrCorruptCatalog naming topics/1 and %s", err, catalogPrevName)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "topics", "1", topicRecordName)); err != nil {
		t.Fatalf("topics/1 was touched: %v", err)
	}

	// A directory never written holds no data: it opens.
	fresh := t.TempDir()
	b, err := Open(fresh, e.opts())
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}

// TestOrphanTopicDirKept: a topic directory the catalog does not list (the
// catalog fell back to an older copy) is reported, kept and never reused:
// the next topic created takes a new id and the orphan's data stays.
func TestOrphanTopicDirKept(t *testing.T) {
	var mu sync.Mutex
	var logs []string
	logf := func(f string, a ...any) {
		mu.Lock()
		logs = append(logs, f)
		mu.Unlock()
	}
	e := newEnvWith(t, func(o *Options) { o.Logf = logf })
	e.topic("first", TopicConfig{})
	second := e.topic("second", TopicConfig{})
	e.publish(second, "orphaned")
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	// A catalog that lost "second" (an older copy put back, say).
	c, _, err := decodeCatalog(mustRead(t, filepath.Join(e.dir, catalogName)))
	if err != nil {
		t.Fatal(err)
	}
	c.Topics = c.Topics[:1]
	if err := c.save(e.dir, 0); err != nil {
		t.Fatal(err)
	}
	o := e.opts()
	o.Logf = logf
	b, err := Open(e.dir, o)
	if err != nil {
		t.Fatal(err)
	}
	e.b = b
	orphan := filepath.Join(e.dir, "topics", "2")
	if got := b.Orphans(); len(got) != 1 || got[0] != orphan {
		t.Fatalf("Orphans() = %v, want [%s]", got, orphan)
	}
	mu.Lock()
	joined := strings.Join(logs, "\n")
	mu.Unlock()
	if !strings.Contains(joined, "is not in the catalog") {
		t.Fatalf("no WARN about the orphan in %q", logs)
	}
	third, err := b.CreateTopic("third", TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if third.id == 2 {
		t.Fatal("the new topic reused the orphan's id")
	}
	if r, err := readTopicRecord(orphan); err != nil || r.Topic.Name != "second" {
		t.Fatalf("orphan's topic.json: %+v, %v", r, err)
	}
	if held, _ := topicDirsWithData(e.dir); len(held) != 3 {
		t.Fatalf("topic directories with data: %v", held)
	}
}

// TestCatalogKeepsPreviousCopy: each fold of the journal into catalog.json
// (here at Close) keeps the copy it replaces, and every topic directory
// holds its own entry (topic.json) as soon as the change is made.
func TestCatalogKeepsPreviousCopy(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("orders", TopicConfig{})
	e.restart()
	tp, _ = e.b.Topic("orders")
	e.group(tp, "billing", GroupConfig{DeadLetter: "-"})
	r, err := readTopicRecord(tp.dir)
	if err != nil || len(r.Topic.Groups) != 1 || r.NextGroupID != 2 {
		t.Fatalf("topic.json: %+v, %v", r, err)
	}
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	e.b = nil
	prev, err := os.ReadFile(filepath.Join(e.dir, catalogPrevName))
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := decodeCatalog(prev)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Topics) != 1 || len(c.Topics[0].Groups) != 0 {
		t.Fatalf("previous copy: %+v, want the catalog before the group", c)
	}
	if c, _, err = decodeCatalog(mustRead(t, filepath.Join(e.dir, catalogName))); err != nil || len(c.Topics) != 1 || len(c.Topics[0].Groups) != 1 {
		t.Fatalf("catalog after Close: %+v, %v; want the group folded in", c, err)
	}
}

// TestRefusedSecondTopicDoesNotHang is the regression test for "a start
// refused at the second topic hangs": Open stopped the topics opened
// before the refusal as if their actors ran, and waited for them forever.
func TestRefusedSecondTopicDoesNotHang(t *testing.T) {
	e := newEnv(t, nil)
	e.topic("first", TopicConfig{})
	second := e.topic("second", TopicConfig{})
	dir := second.dir
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	e.b = nil
	if err := os.RemoveAll(filepath.Join(dir, "0", snapName)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		b, err := Open(e.dir, e.opts())
		if err == nil {
			b.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !IsDamage(err) {
			t.Fatalf("Open: %v, want a refusal", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open hung after refusing the second topic")
	}
}

// TestRepairAdoptsOrphan: fibril repair --adopt takes an orphaned topic
// directory back into the catalog from its topic.json, with its groups and
// its messages; without --adopt it is left alone.
func TestRepairAdoptsOrphan(t *testing.T) {
	e := newEnv(t, nil)
	e.topic("first", TopicConfig{})
	second := e.topic("second", TopicConfig{})
	e.group(second, "g", GroupConfig{DeadLetter: "-"})
	e.publish(second, "kept")
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	e.b = nil
	// A catalog that lost "second" (an older copy put back, say).
	c, _, err := decodeCatalog(mustRead(t, filepath.Join(e.dir, catalogName)))
	if err != nil {
		t.Fatal(err)
	}
	c.Topics = c.Topics[:1]
	if err := c.save(e.dir, 0); err != nil {
		t.Fatal(err)
	}
	rep, err := Repair(e.dir, RepairOptions{Engine: e.opts()})
	if err != nil || rep.Quarantine != "" {
		t.Fatalf("Repair without --adopt: %+v, %v", rep.Actions, err)
	}
	rep, err = Repair(e.dir, RepairOptions{Engine: e.opts(), Adopt: true})
	if err != nil || !strings.Contains(strings.Join(rep.Actions, "\n"), "adopted topic second") {
		t.Fatalf("Repair --adopt: %v\n%s", err, strings.Join(rep.Actions, "\n"))
	}
	e.open()
	tp, ok := e.b.Topic("second")
	if !ok {
		t.Fatal("second not adopted")
	}
	g, ok := tp.FindGroup("g")
	if !ok {
		t.Fatal("its group lost")
	}
	if ds := e.pollNow(g, 10, 0); len(ds) != 1 || string(ds[0].Data) != "kept" {
		t.Fatalf("adopted topic delivers %v", datas(ds))
	}
	if nt, err := e.b.CreateTopic("third", TopicConfig{}); err != nil || nt.id <= second.id {
		t.Fatalf("a new topic after the adoption: %v (id %d)", err, nt.id)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
