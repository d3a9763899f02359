package broker

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/fibrilmq/fibril/wire"
)

// Broker is an open broker: a directory of topics. Its methods are safe for
// concurrent use.
type Broker struct {
	dir  string
	opts Options

	// requeueMu runs requeues one at a time (requeue.go,
	// requeue_select.go), so no two move the same dead letter.
	requeueMu sync.Mutex

	// catApply runs a replicated catalog's applies one at a time
	// (catrepl.go); taken before mu.
	catApply sync.Mutex

	// mu serializes catalog changes (create/delete of topics and groups)
	// and guards cat and every Topic.groups. It is never held on the
	// publish/poll/settle path and partition actors never take it.
	mu       sync.Mutex
	cat      catalog
	journal  *catJournal // catalog.journal, open (catjournal.go)
	catBytes int64       // the size of catalog.json at its last fold
	// Creates in flight (CreateTopic): their names and filters, the next
	// id not handed out, and the goroutines Close waits for.
	pending  map[TopicName][]string
	nextID   TopicID
	creating sync.WaitGroup

	table  atomic.Pointer[topicTable]
	closed atomic.Bool
	st     brokerStats

	// The last owners released (ReleaseOwner), so a poll handed between
	// partitions stops leasing to an owner released meanwhile.
	relGen   atomic.Uint64
	released [releasedRing]atomic.Uint64

	bodies bodyPool // publish body buffers (bodypool.go)

	// damagedStops counts groups stopped at a damaged record (damage.go),
	// so Damaged costs nothing while there is none.
	damagedStops atomic.Int64
	orphans      []string  // topic directories the catalog lacks (orphans.go)
	losses       []Loss    // offsets settled at Open as lost to damage (lost.go)
	scrub        *scrubber // the background scrub (scrub.go); nil when off

	// principals maps an OwnerID to the Principal its leases are bound
	// to (SetPrincipal); entries leave with ReleaseOwner.
	principals sync.Map

	// diskFull is the current full-disk episode (diskfull.go); nil while
	// the disk has room.
	diskFull atomic.Pointer[DiskFull]
	// fileLimit counts open-files limit errors (filelimit.go).
	fileLimit fileLimit
	logs      logCache // partitions with open logs (idle.go)
	lock      *os.File // the data directory's LOCK (brokerlock.go)
}

// SetPrincipal binds the leases owner takes from now on to principal p:
// their handles accept only settles made as p (SettleOp.As) or without a
// principal. The server calls it once a connection has authenticated;
// ReleaseOwner forgets it. Owners never bound take leases without a
// principal, which any settle may settle.
func (b *Broker) SetPrincipal(owner OwnerID, p Principal) {
	if owner == 0 {
		return
	}
	if p == 0 {
		b.principals.Delete(owner)
		return
	}
	b.principals.Store(owner, p)
}

// principalOf is the principal owner's leases are bound to (0: none).
func (b *Broker) principalOf(owner OwnerID) Principal {
	if owner == 0 {
		return 0
	}
	if v, ok := b.principals.Load(owner); ok {
		return v.(Principal)
	}
	return 0
}

const releasedRing = 256

// ownerReleasedSince reports whether owner may have been released since
// generation gen (true when too many releases happened to tell).
func (b *Broker) ownerReleasedSince(owner OwnerID, gen uint64) bool {
	now := b.relGen.Load()
	if now-gen >= releasedRing {
		return true
	}
	for i := gen + 1; i <= now; i++ {
		if b.released[i%releasedRing].Load() == uint64(owner) {
			return true
		}
	}
	return false
}

// Open opens (creating if needed) the broker kept in dir: it loads the
// catalog, recovers every partition (data log, latest snapshot plus the
// events after it) and starts the partition actors. opts is not modified.
func Open(dir string, opts Options) (*Broker, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "topics"), 0o755); err != nil {
		return nil, fmt.Errorf("open broker: %w", err)
	}
	b := &Broker{dir: dir, opts: o}
	b.logs.max = o.MaxOpenPartitions
	lock, err := lockBrokerDir(dir, true)
	if err != nil {
		return nil, fmt.Errorf("open broker: %w", err)
	}
	b.lock = lock
	if err := b.loadCatalog(); err != nil {
		lock.Close()
		return nil, fmt.Errorf("open broker %s: %w", dir, err)
	}
	var opened []*Topic
	for _, ct := range b.cat.Topics {
		if _, err := os.Stat(b.topicDir(ct.ID)); err != nil {
			// The catalog says the topic exists: opening empty logs in
			// its place would silently drop its messages and state.
			for _, t := range opened {
				t.stopUnstarted() // not started: no actor to stop
			}
			b.closeCatalog()
			b.lock.Close()
			return nil, fmt.Errorf("open broker %s: %w: the catalog lists topic %s (id %d) but its directory is gone (restore it from a backup; starting without it would drop its messages): %v", dir, ErrCorruptState, ct.Name, ct.ID, err)
		}
		t, err := b.openTopic(ct)
		if err != nil {
			for _, t := range opened {
				t.stopUnstarted() // not started: no actor to stop
			}
			b.closeCatalog()
			b.lock.Close()
			return nil, fmt.Errorf("open broker %s: %w", dir, err)
		}
		opened = append(opened, t)
		b.cacheOpened(t, false)
	}
	b.table.Store(newTopicTable(opened))
	for _, t := range opened {
		t.start()
	}
	b.startScrub()
	return b, nil
}

func (b *Broker) logf(format string, args ...any) {
	if b.opts.Logf != nil {
		b.opts.Logf(format, args...)
		return
	}
	log.Printf("fibril broker: "+format, args...)
}

func (b *Broker) topicDir(id TopicID) string {
	return filepath.Join(b.dir, "topics", strconv.FormatUint(uint64(id), 10))
}

// openTopic opens a topic's partitions and recovers them (not started).
func (b *Broker) openTopic(ct catTopic) (*Topic, error) {
	t := &Topic{b: b, id: ct.ID, name: ct.Name, cfg: ct.Config, dir: b.topicDir(ct.ID), groups: map[GroupName]*Group{},
		placement: ct.Placement}
	// The topic's directory holds its topic.json even where no
	// partition is held (placement.go); each held partition adds its own.
	if err := os.MkdirAll(t.dir, 0o755); err != nil {
		return nil, fmt.Errorf("topic %s: %w", ct.Name, err)
	}
	var groups []*Group
	for _, cg := range ct.Groups {
		g := &Group{t: t, id: cg.ID, name: cg.Name, cfg: cg.Config, parts: make([]*groupPart, ct.Config.Partitions)}
		g.paused.Store(cg.Paused)
		t.groups[cg.Name] = g
		groups = append(groups, g)
	}
	for i := 0; i < ct.Config.Partitions; i++ {
		p, err := openPartition(t, Partition(i), groups)
		if err != nil {
			for _, p := range t.parts {
				p.closeStores()
			}
			return nil, fmt.Errorf("topic %s: %w", ct.Name, err)
		}
		t.parts = append(t.parts, p)
	}
	return t, nil
}

func (t *Topic) start() {
	for _, p := range t.parts {
		go p.run()
	}
}

func (t *Topic) stop() {
	var wg sync.WaitGroup
	for _, p := range t.parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stop()
		}()
	}
	wg.Wait()
}

func (b *Broker) topicList() []*Topic { return b.table.Load().list() }

// Topic returns the topic named name.
func (b *Broker) Topic(name TopicName) (*Topic, bool) {
	t := b.table.Load().topic(name)
	return t, t != nil
}

// TopicByID returns the topic whose id is id (an ack handle names it).
func (b *Broker) TopicByID(id TopicID) (*Topic, bool) {
	t := b.table.Load().topicByID(id)
	return t, t != nil
}

// Topics returns every topic, sorted by name.
func (b *Broker) Topics() []*Topic {
	ts := b.topicList()
	names := make([]TopicName, len(ts))
	for i, t := range ts {
		names[i] = t.name
	}
	sortNames(names)
	tt := b.table.Load()
	for i, n := range names {
		ts[i] = tt.topic(n)
	}
	return ts
}

// Route returns the topic whose subject filters capture subject, or nil.
// Subjects in the reserved "$" space are captured only by "$" topics and
// the other way round. Route does not block and does not allocate.
func (b *Broker) Route(subject string) *Topic { return b.table.Load().route(subject) }

// CreateTopic creates a topic. It fails with ErrTopicExists, ErrOverlap
// (its filters overlap another topic's), ErrInvalid (bad name or config; the
// "$" space is reserved) or an I/O error. It blocks on disk I/O. Creates
// run at once: each reserves its name and id under the catalog lock, makes
// its files without it, and shares the catalog journal's fsync with the
// others (group commit); it returns once its catalog change is durable.
//
// With Options.Catalog the create is ordered with every broker's catalog
// changes first (catrepl.go) and made on each by ApplyCatalog.
func (b *Broker) CreateTopic(name TopicName, cfg TopicConfig) (*Topic, error) {
	if b.opts.Catalog != nil {
		placement, err := b.place(name, cfg)
		if err != nil {
			return nil, err
		}
		v, err := b.proposeOp(catOp{Kind: opCreateTopic, Topic: name, TopicConfig: &cfg, Placement: placement})
		t, _ := v.(*Topic)
		return t, err
	}
	return b.createTopic(name, cfg, 0, nil)
}

// createTopic is CreateTopic made here, with the id given (0: the next
// free one) and the placement (nil: every partition on every node).
func (b *Broker) createTopic(name TopicName, cfg TopicConfig, id TopicID, placement [][]string) (*Topic, error) {
	if err := validTopicName(name, false); err != nil {
		return nil, fmt.Errorf("create topic: %w", err)
	}
	b.mu.Lock()
	ch, err := b.reserveTopicLocked(name, cfg, id, placement)
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	defer b.creating.Done()
	t, err := b.buildTopic(ch)
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.finishCreateLocked(name, ch, t, err)
}

// createTopicLocked is CreateTopic for a caller holding b.mu (a group
// creating its dead-letter topic).
func (b *Broker) createTopicLocked(name TopicName, cfg TopicConfig) (*Topic, error) {
	ch, err := b.reserveTopicLocked(name, cfg, 0, nil)
	if err != nil {
		return nil, err
	}
	defer b.creating.Done()
	t, err := b.buildTopic(ch)
	return b.finishCreateLocked(name, ch, t, err)
}

// finishCreateLocked ends a create whose topic buildTopic returned (with
// err): the name's reservation goes; a built topic enters the catalog and
// starts.
func (b *Broker) finishCreateLocked(name TopicName, ch catChange, t *Topic, err error) (*Topic, error) {
	delete(b.pending, name)
	if err != nil {
		return nil, err
	}
	b.cat.apply(ch)
	b.journal.applied()
	b.startTopicLocked(t)
	b.maybeFoldLocked()
	return t, nil
}

// reserveTopicLocked checks a new topic against the topics and the creates
// in flight, reserves its name, filters and id (b.pending, b.nextID) and
// returns its catalog change (with the counters as they are now). A
// non-zero want is the id to take (a replicated catalog's restore);
// placement is the topic's (checked against cfg: placement.go).
func (b *Broker) reserveTopicLocked(name TopicName, cfg TopicConfig, want TopicID, placement [][]string) (catChange, error) {
	if b.closed.Load() {
		return catChange{}, ErrClosed
	}
	cfg, err := cfg.withDefaults(name)
	if err != nil {
		return catChange{}, fmt.Errorf("create topic %s: %w", name, err)
	}
	if err := b.checkPlacement(cfg, placement); err != nil {
		return catChange{}, fmt.Errorf("create topic %s: %w", name, err)
	}
	tt := b.table.Load()
	if _, busy := b.pending[name]; busy || tt.topic(name) != nil {
		return catChange{}, fmt.Errorf("create topic %s: %w", name, ErrTopicExists)
	}
	if err := tt.overlaps(name, cfg.Subjects); err != nil {
		return catChange{}, fmt.Errorf("create topic %s: %w", name, err)
	}
	reserved := wire.IsReserved(name)
	for pn, subjects := range b.pending {
		if wire.IsReserved(pn) != reserved {
			continue
		}
		for _, f := range subjects {
			for _, g := range cfg.Subjects {
				if filtersOverlap(f, g) {
					return catChange{}, fmt.Errorf("create topic %s: %w: %q overlaps %q of topic %s (being created)", name, ErrOverlap, g, f, pn)
				}
			}
		}
	}
	// A directory the catalog does not list (a create that crashed
	// before the catalog was written, an orphan) is never reused or
	// removed: the new topic takes the next id whose directory is free.
	id, err := b.freeTopicID()
	if want != 0 {
		id, err = want, nil
	}
	if err != nil {
		return catChange{}, fmt.Errorf("create topic %s: %w", name, err)
	}
	b.nextID = max(b.nextID, id+1)
	if b.pending == nil {
		b.pending = map[TopicName][]string{}
	}
	b.pending[name] = cfg.Subjects
	b.creating.Add(1)
	ct := catTopic{ID: id, Name: name, Config: cfg, Placement: placement}
	ch := b.cat.changeOf(ct)
	ch.NextTopicID = max(ch.NextTopicID, b.nextID)
	return ch, nil
}

// buildTopic makes a reserved topic's files and makes its catalog change
// durable (without b.mu, or with it for createTopicLocked). On success
// the journal counts the change as unapplied until the caller applies it.
func (b *Broker) buildTopic(ch catChange) (*Topic, error) {
	ct := *ch.Topic
	t, err := b.openTopic(ct)
	if err != nil {
		return nil, fmt.Errorf("create topic %s: %w", ct.Name, b.noteFileErr(err))
	}
	if err := b.persistChange(ch); err != nil {
		t.stopUnstarted()
		if !b.journal.broken() {
			// This call made the directory and nothing in it was confirmed.
			os.RemoveAll(t.dir)
		} // else the change may be on disk after all: a restart decides
		return nil, fmt.Errorf("create topic %s: %w", ct.Name, b.noteFileErr(err))
	}
	return t, nil
}

// startTopicLocked starts a created topic and routes to it.
func (b *Broker) startTopicLocked(t *Topic) {
	t.start()
	b.cacheOpened(t, true)
	b.table.Store(b.table.Load().with(t))
}

func (t *Topic) stopUnstarted() {
	for _, p := range t.parts {
		p.closeStores()
	}
}

// DeleteTopic stops the topic's partitions and deletes its data. Its id is
// never reused. Pending async callbacks of the topic get ErrClosed.
func (b *Broker) DeleteTopic(name TopicName) error {
	if b.opts.Catalog != nil {
		_, err := b.proposeOp(catOp{Kind: opDeleteTopic, Topic: name})
		return err
	}
	return b.deleteTopic(name)
}

// deleteTopic is DeleteTopic made here.
func (b *Broker) deleteTopic(name TopicName) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.Topic(name)
	if !ok {
		return fmt.Errorf("delete topic %s: %w", name, ErrNoTopic)
	}
	ch := catChange{NextTopicID: b.cat.NextTopicID, NextGroupID: b.cat.NextGroupID, Deleted: t.id}
	if err := b.commitCatalog(ch); err != nil {
		return fmt.Errorf("delete topic %s: %w", name, err)
	}
	b.table.Store(b.table.Load().without(t))
	t.stop()
	if err := os.RemoveAll(t.dir); err != nil {
		return fmt.Errorf("delete topic %s: remove data: %w", name, err)
	}
	return nil
}

// Settle applies op to the delivery h without blocking: ack, nack (with a
// redelivery delay), reject (dead-letter) or extend. It returns
// ErrUnknownHandle or ErrInvalid for a bad handle or op, or ErrClosed, at
// once (done is then not called); otherwise done is called
// exactly once on the partition's actor goroutine, after the change is
// durable, with nil, ErrStaleHandle, ErrUnknownHandle, ErrNotInflight or
// ErrNotHolder (op.Principal is not the one the delivery was made to).
// A full ring does not refuse a settle (it takes an unbounded side path:
// settles are bounded by deliveries), so Settle never returns ErrQueueFull.
// Acking a settled offset is nil (idempotent).
func (b *Broker) Settle(h Handle, op SettleOp, done func(error)) error {
	p, err := b.partitionOf(h)
	if err != nil {
		return err
	}
	if op.Kind < SettleAck || op.Kind > SettleExtend {
		return fmt.Errorf("%w: settle kind %d", ErrInvalid, op.Kind)
	}
	c := command{kind: cmdSettle, h: h, op: op, setDone: done}
	err = p.push(&c)
	if err == ErrQueueFull {
		// Settles are bounded by what was delivered, and refusing an ack
		// because publishers filled the ring would stall consumers: take
		// the unbounded control path instead.
		cc := c // only this rare path moves a command to the heap
		return p.controlChecked(func(p *partition) { p.settle(&cc) })
	}
	return err
}

func (b *Broker) partitionOf(h Handle) (*partition, error) {
	t := b.table.Load().topicByID(h.Topic)
	if t == nil {
		return nil, fmt.Errorf("%w: topic id %d", ErrUnknownHandle, h.Topic)
	}
	if int(h.Partition) >= len(t.parts) {
		return nil, fmt.Errorf("%w: topic %s has no partition %d", ErrUnknownHandle, t.name, h.Partition)
	}
	return t.parts[h.Partition], nil
}

// ReleaseOwner puts every lease held by owner back to ready at once, drops
// its parked polls (answered with ErrClosed) and closes its subscriptions.
// The server calls it when a connection closes. It does not block.
func (b *Broker) ReleaseOwner(owner OwnerID) {
	if owner == 0 {
		return
	}
	b.principals.Delete(owner)
	// Recorded before the partitions are told: a poll in transit that
	// misses it reaches its next partition before that partition's release.
	b.released[b.relGen.Add(1)%releasedRing].Store(uint64(owner))
	for _, t := range b.topicList() {
		for _, p := range t.parts {
			if p.sleep.asleep.Load() {
				// Its logs are closed: it has no lease, poll or
				// subscription (idle.go), and a control would reopen them.
				continue
			}
			p.control(func(p *partition) {
				for _, gp := range p.order {
					gp.release(owner, p.now)
					k := 0
					for _, w := range gp.waiters {
						if w.owner == owner {
							if w.claim() {
								p.commit.onCommit(func() { w.finish(nil, ErrClosed) })
							}
							continue
						}
						gp.waiters[k] = w
						k++
					}
					gp.waiters = gp.waiters[:k]
					k = 0
					for _, s := range gp.subs {
						if s.owner == owner {
							s.closed.Store(true)
							gp.releaseSub(s)
							continue
						}
						gp.subs[k] = s
						k++
					}
					gp.subs = gp.subs[:k]
					gp.rr = 0
				}
			})
		}
	}
}

// Close stops intake, lets every partition finish what it holds (commits
// and callbacks), writes snapshots and closes the logs. A second Close
// returns nil.
func (b *Broker) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	b.stopScrub() // it reads the logs the partitions are about to close
	b.mu.Lock()
	b.mu.Unlock() // a create that saw the broker open has counted itself in creating
	b.creating.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range b.topicList() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.stop()
		}()
	}
	wg.Wait()
	var errs []error
	for _, t := range b.topicList() {
		for _, p := range t.parts {
			errs = append(errs, p.closeErr)
		}
	}
	errs = append(errs, b.closeCatalog())
	b.lock.Close() // after every log: drops the flock
	return errors.Join(errs...)
}

// settleWait is Settle for sync callers: it waits for ring room and for the
// answer, both bounded by ctx.
func (b *Broker) settleWait(ctx context.Context, h Handle, op SettleOp) error {
	if b == nil {
		return fmt.Errorf("%w: delivery not from a broker", ErrInvalid)
	}
	p, err := b.partitionOf(h)
	if err != nil {
		return err
	}
	ch := make(chan error, 1)
	c := command{kind: cmdSettle, h: h, op: op, setDone: func(err error) { ch <- err }}
	if err := pushWait(ctx, p, &c); err != nil {
		return fmt.Errorf("settle %s: %w", h, err)
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return fmt.Errorf("settle %s: %w", h, ctx.Err())
	}
}
