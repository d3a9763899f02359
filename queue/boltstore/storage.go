package boltstore

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
	bolt "go.etcd.io/bbolt"
)

const (
	// formatVersion is the layout this package writes and reads.
	formatVersion = "1"
	// flushEvery bounds how long a PolicyNone append waits in memory.
	flushEvery = 100 * time.Millisecond
	// maxPendingBytes: a PolicyNone log with this much uncommitted commits
	// in its Append (backpressure, and a bound on the memory held).
	maxPendingBytes = 8 << 20
)

var (
	rootBucket = []byte("fibril.logs")
	versionKey = []byte("\x00version")
	floorKey   = []byte{0}
)

// ErrInUse: OpenLog of a log that is already open.
var ErrInUse = errors.New("boltstore: log already open")

// Storage keeps any number of logs in one bbolt database; its OpenLog
// serves queue.Options.Storage. Safe for concurrent use.
//
// Lock order: committer.mu, then Storage.mu, then a Log's mu.
type Storage struct {
	db    *bolt.DB
	owned bool // opened by Open: Close closes it
	path  string

	c committer

	mu     sync.Mutex
	logs   map[string]*Log
	closed bool

	stop, done chan struct{} // the flusher
}

// committer runs one bbolt commit at a time; callers waiting for theirs
// sleep on cond while another runs (a group commit).
type committer struct {
	mu      sync.Mutex
	cond    *sync.Cond
	running bool
}

// Open opens (creating it if needed, mode 0600) the bbolt file at path and
// returns a Storage on it; Close closes the file. It waits up to 1 s for
// another process's lock on the file, then fails.
func Open(path string) (*Storage, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	st, err := newStorage(db, true)
	if err != nil {
		db.Close()
		return nil, err
	}
	return st, nil
}

// New returns a Storage on db, an open bbolt database the caller keeps
// owning: Close leaves it open, and the caller closes it after the
// Storage. The Storage uses only the root bucket "fibril.logs". db's own
// settings hold: with NoSync set nothing is durable before the OS writes
// it back, whatever the policy.
func New(db *bolt.DB) (*Storage, error) {
	if db == nil {
		return nil, errors.New("boltstore: New with a nil DB")
	}
	return newStorage(db, false)
}

func newStorage(db *bolt.DB, owned bool) (*Storage, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		root, err := tx.CreateBucketIfNotExists(rootBucket)
		if err != nil {
			return err
		}
		switch v := root.Get(versionKey); {
		case v == nil:
			return root.Put(versionKey, []byte(formatVersion))
		case string(v) != formatVersion:
			return fmt.Errorf("written in format %q, this version reads %q", v, formatVersion)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: %s: %w", db.Path(), err)
	}
	st := &Storage{db: db, owned: owned, path: db.Path(), logs: map[string]*Log{},
		stop: make(chan struct{}), done: make(chan struct{})}
	st.c.cond = sync.NewCond(&st.c.mu)
	go st.flusher()
	return st, nil
}

// DB returns the bbolt database the logs live in.
func (st *Storage) DB() *bolt.DB { return st.db }

// OpenLog opens the log called name, creating its bucket the first time,
// with the given durability policy (see the package doc): PolicySync makes
// Append wait for its commit, PolicyCaller and PolicyNone buffer appends. The
// name must be non-empty and not start with a NUL byte. It fails with
// ErrInUse if the log is open already, seglog.ErrClosed after Close, and
// with bbolt's error if the bucket cannot be created.
func (st *Storage) OpenLog(name string, policy seglog.Policy) (seglog.Store, error) {
	if name == "" || name[0] == 0 {
		return nil, fmt.Errorf("boltstore: log name %q: empty or starting with NUL", name)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, seglog.ErrClosed
	}
	if st.logs[name] != nil {
		return nil, fmt.Errorf("%w: %s", ErrInUse, name)
	}
	l := &Log{st: st, name: name, bucket: []byte(name), buffered: policy != seglog.PolicySync}
	err := st.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.Bucket(rootBucket).CreateBucketIfNotExists(l.bucket)
		if err != nil {
			return err
		}
		var floor seglog.Seq = 1
		if v := b.Get(floorKey); len(v) == 8 {
			floor, _ = keySeq(v)
		}
		c := b.Cursor()
		k, _ := c.Seek(key(0))
		lo, ok := keySeq(k)
		if !ok {
			l.first, l.last = floor, floor-1
			return nil
		}
		hi, _ := keySeq(k)
		if k, _ := c.Last(); k != nil {
			hi, _ = keySeq(k)
		}
		l.first, l.last = lo, hi
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: %s: open log %s: %w", st.path, name, err)
	}
	l.durable = l.last
	st.logs[name] = l
	return l, nil
}

// Close commits what every open log has pending, closes them, and closes
// the bbolt file if Open opened it. Close the queue DB using the Storage
// first. A second Close returns nil.
func (st *Storage) Close() error {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return nil
	}
	st.closed = true
	logs := make([]*Log, 0, len(st.logs))
	for _, l := range st.logs {
		logs = append(logs, l)
	}
	st.mu.Unlock()
	close(st.stop)
	<-st.done
	var errs []error
	for _, l := range logs {
		errs = append(errs, l.Close())
	}
	if st.owned {
		if err := st.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("boltstore: close %s: %w", st.path, err))
		}
	}
	return errors.Join(errs...)
}

// flusher commits buffered appends and truncations every flushEvery.
func (st *Storage) flusher() {
	defer close(st.done)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-st.stop:
			return
		case <-t.C:
			st.c.mu.Lock()
			if !st.c.running {
				st.lead()
			}
			st.c.mu.Unlock()
		}
	}
}

// commitFor returns once l's changes up to generation gen are committed
// (nil) or the commit holding them failed. It leads a commit when none
// runs, else waits for the running one and goes again: a change made
// during a commit is in the next.
func (st *Storage) commitFor(l *Log, gen uint64) error {
	c := &st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if done, err := l.committed(gen); done || err != nil {
			return err
		}
		if c.running {
			c.cond.Wait()
			continue
		}
		st.lead()
	}
}

// lead runs one commit (c.mu held on entry and exit, released meanwhile)
// and wakes the waiters.
func (st *Storage) lead() {
	c := &st.c
	c.running = true
	c.mu.Unlock()
	st.commit()
	c.mu.Lock()
	c.running = false
	c.cond.Broadcast()
}

// pending is what one log gives a commit.
type pending struct {
	l       *Log
	recs    []pend
	floor   seglog.Seq // truncate below (0: no truncation)
	gen     uint64
	through seglog.Seq // last record of recs (or the durable point)
}

// commit writes every open log's pending changes in one bbolt transaction.
// Only the leader calls it, so no two run at once.
func (st *Storage) commit() {
	st.mu.Lock()
	var work []pending
	for _, l := range st.logs {
		if p, ok := l.take(); ok {
			work = append(work, p)
		}
	}
	st.mu.Unlock()
	if len(work) == 0 {
		return
	}
	err := st.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(rootBucket)
		for _, p := range work {
			b := root.Bucket(p.l.bucket)
			if b == nil {
				return fmt.Errorf("log %s: bucket gone", p.l.name)
			}
			if err := p.write(b); err != nil {
				return fmt.Errorf("log %s: %w", p.l.name, err)
			}
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("boltstore: %s: commit: %w: %w", st.path, seglog.ErrSyncFailed, err)
	}
	for _, p := range work {
		p.l.done(p, err)
	}
}

// write applies p to its log's bucket: the truncation first, then the
// records at or above it.
func (p *pending) write(b *bolt.Bucket) error {
	if p.floor > 0 {
		c := b.Cursor()
		for k, _ := c.Seek(key(0)); k != nil; k, _ = c.Seek(key(0)) {
			if seq, ok := keySeq(k); !ok || seq >= p.floor {
				break
			}
			if err := c.Delete(); err != nil {
				return err
			}
		}
		if err := b.Put(floorKey, key(p.floor)); err != nil {
			return err
		}
	}
	b.FillPercent = 0.95 // keys only grow: pack the pages
	for i := range p.recs {
		r := &p.recs[i]
		if r.seq < p.floor {
			continue
		}
		if err := b.Put(key(r.seq), r.val); err != nil {
			return err
		}
	}
	return nil
}
