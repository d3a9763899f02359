package boltstore_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/queue/boltstore"
	"github.com/fibrilmq/fibril/server/seglog"
	"github.com/fibrilmq/fibril/server/seglog/storetest"
	bolt "go.etcd.io/bbolt"
)

// openLog opens the log "topics/1/0/data" of the bbolt file in dir,
// closing the Storage with the log.
func openLog(t *testing.T, dir string, p seglog.Policy) seglog.Store {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(dir, "queues.db"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := st.OpenLog("topics/1/0/data", p)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	return closeBoth{l, st}
}

// closeBoth is a log whose Close closes its Storage too.
type closeBoth struct {
	seglog.Store
	st *boltstore.Storage
}

func (c closeBoth) Close() error {
	err := c.Store.Close()
	if serr := c.st.Close(); err == nil {
		err = serr
	}
	return err
}

// TestConformance runs the shared store suite on a boltstore log under
// each policy, the SIGKILL case included.
func TestConformance(t *testing.T) {
	for _, p := range []seglog.Policy{seglog.PolicySync, seglog.PolicyCaller, seglog.PolicyNone} {
		t.Run(p.String(), func(t *testing.T) {
			storetest.Run(t, func(t *testing.T, dir string) seglog.Store { return openLog(t, dir, p) },
				storetest.Options{Persistent: true, DurableOnAppend: p == seglog.PolicySync})
		})
	}
}

// openDB opens a bbolt file of the test's own, closed at cleanup.
func openDB(t *testing.T, path string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newStorage(t *testing.T, db *bolt.DB) *boltstore.Storage {
	t.Helper()
	st, err := boltstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func mustAppend(t *testing.T, l seglog.Store, data ...string) seglog.Seq {
	t.Helper()
	es := make([]seglog.Entry, len(data))
	for i, d := range data {
		es[i] = seglog.Entry{Meta: []byte("m"), Data: []byte(d)}
	}
	first, err := l.Append(es)
	if err != nil {
		t.Fatal(err)
	}
	return first
}

// TestManyLogsOneFile: logs of one Storage keep their own numbering and
// records across a reopen, and a Storage on a caller's DB leaves the
// caller's buckets alone and the DB open.
func TestManyLogsOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	db := openDB(t, path)
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("users"))
		if err != nil {
			return err
		}
		return b.Put([]byte("ann"), []byte("admin"))
	}); err != nil {
		t.Fatal(err)
	}
	st := newStorage(t, db)
	names := []string{"topics/1/0/data", "topics/1/0/events", "topics/2/0/data"}
	policies := []seglog.Policy{seglog.PolicySync, seglog.PolicyNone, seglog.PolicyCaller}
	logs := make([]seglog.Store, len(names))
	for i, n := range names {
		l, err := st.OpenLog(n, policies[i])
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = l
	}
	if _, err := st.OpenLog(names[0], seglog.PolicySync); !errors.Is(err, boltstore.ErrInUse) {
		t.Fatalf("second OpenLog of an open log: %v, want ErrInUse", err)
	}
	for round := range 20 {
		for i, l := range logs {
			if seq := mustAppend(t, l, fmt.Sprintf("%s-%d", names[i], round)); seq != seglog.Seq(round+1) {
				t.Fatalf("log %s: round %d got seq %d", names[i], round, seq)
			}
		}
	}
	if err := logs[1].TruncateFront(11); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("users")).Get([]byte("ann")); string(v) != "admin" {
			return fmt.Errorf("the caller's bucket holds %q", v)
		}
		return nil
	}); err != nil {
		t.Fatalf("the caller's DB after Storage.Close: %v", err)
	}
	st = newStorage(t, db)
	for i, n := range names {
		l, err := st.OpenLog(n, seglog.PolicySync)
		if err != nil {
			t.Fatal(err)
		}
		first, last := l.Bounds()
		want := seglog.Seq(1)
		if i == 1 {
			want = 11
		}
		if first != want || last != 20 {
			t.Fatalf("log %s after reopen: bounds %d,%d; want %d,20", n, first, last, want)
		}
		for seq := first; seq <= last; seq++ {
			r, err := l.Read(seq)
			if err != nil || string(r.Data) != fmt.Sprintf("%s-%d", n, seq-1) {
				t.Fatalf("log %s record %d: %q, %v", n, seq, r.Data, err)
			}
		}
	}
}

// TestCorruptValueIsRefused: a flipped bit in a stored value, or a value
// moved under another key, reads as ErrCorrupt, never as data; Scan
// passes the records before it, then fails.
func TestCorruptValueIsRefused(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "app.db"))
	st := newStorage(t, db)
	l, err := st.OpenLog("q", seglog.PolicySync)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, "one", "two", "three", "four")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	key := func(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("fibril.logs")).Bucket([]byte("q"))
		v := append([]byte(nil), b.Get(key(3))...)
		v[len(v)-1] ^= 0x10 // a bit of "three"
		if err := b.Put(key(3), v); err != nil {
			return err
		}
		return b.Put(key(4), append([]byte(nil), b.Get(key(2))...)) // "two" under 4
	}); err != nil {
		t.Fatal(err)
	}
	if l, err = st.OpenLog("q", seglog.PolicySync); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []seglog.Seq{3, 4} {
		if r, err := l.Read(seq); !errors.Is(err, seglog.ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("seq %d", seq)) {
			t.Errorf("read of damaged %d: %q, %v; want ErrCorrupt naming it", seq, r.Data, err)
		}
	}
	var passed []string
	err = l.Scan(1, 0, func(r seglog.Record) bool { passed = append(passed, string(r.Data)); return true })
	if !errors.Is(err, seglog.ErrCorrupt) || fmt.Sprint(passed) != "[one two]" {
		t.Errorf("scan over damage passed %v, %v; want [one two] then ErrCorrupt", passed, err)
	}
}

// TestNoneFlushesInTheBackground: a PolicyNone append becomes durable
// within the flush interval without a Sync.
func TestNoneFlushesInTheBackground(t *testing.T) {
	st := newStorage(t, openDB(t, filepath.Join(t.TempDir(), "app.db")))
	l, err := st.OpenLog("q", seglog.PolicyNone)
	if err != nil {
		t.Fatal(err)
	}
	seq := mustAppend(t, l, "later")
	deadline := time.Now().Add(5 * time.Second)
	for l.Durable() < seq {
		if time.Now().After(deadline) {
			t.Fatalf("durable %d five seconds after appending %d", l.Durable(), seq)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFailedCommitIsSticky: once a commit fails (here: the caller closed
// its DB under the Storage), the log reports nothing more durable and
// every Append and Sync fails with ErrSyncFailed.
func TestFailedCommitIsSticky(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "app.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := newStorage(t, db)
	l, err := st.OpenLog("q", seglog.PolicySync)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, "kept")
	db.Close()
	if _, err := l.Append([]seglog.Entry{{Data: []byte("lost")}}); !errors.Is(err, seglog.ErrSyncFailed) {
		t.Fatalf("append after the DB closed: %v, want ErrSyncFailed", err)
	}
	if _, err := l.Sync(); !errors.Is(err, seglog.ErrSyncFailed) {
		t.Fatalf("sync after a failed commit: %v", err)
	}
	if _, err := l.Append([]seglog.Entry{{Data: []byte("again")}}); !errors.Is(err, seglog.ErrSyncFailed) {
		t.Fatalf("append after a failed commit: %v", err)
	}
	if d := l.Durable(); d != 1 {
		t.Fatalf("durable %d after the failure, want 1", d)
	}
}

// TestNewerFormatIsRefused: a file written in another layout version is
// not read as this one.
func TestNewerFormatIsRefused(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "app.db"))
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("fibril.logs"))
		if err != nil {
			return err
		}
		return b.Put([]byte("\x00version"), []byte("2"))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := boltstore.New(db); err == nil || !strings.Contains(err.Error(), "format") {
		t.Fatalf("New on format 2: %v", err)
	}
}
