package broker

import (
	"context"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	"github.com/fibrilmq/fibril/server/stagetime"
)

// Limits derived from the data log's record format: the subject travels in
// the record's Meta (at most seglog.MaxMetaSize bytes), and a record plus
// its header must fit in one segment.
const (
	maxSubject  = 32 << 10
	recordSlack = maxSubject + 4<<10
)

// Topic is a named stream of messages split into partitions. Its methods are
// safe for concurrent use.
type Topic struct {
	b     *Broker
	id    TopicID
	name  TopicName
	cfg   TopicConfig
	dir   string
	parts []*partition
	rr    atomic.Uint64
	space signal // room under max_unsettled_*, for blocked publishers

	// resMu guards the reservations of publishes admitted under
	// max_unsettled_* that the partitions' counters do not include yet
	// (reserve). Used only by topics with those limits.
	resMu             sync.Mutex
	resMsgs, resBytes int64

	groups map[GroupName]*Group // guarded by b.mu

	// placement names the nodes holding each partition (nil: every
	// node); fixed at creation (placement.go).
	placement [][]string
}

// Name returns the topic's name.
func (t *Topic) Name() TopicName { return t.name }

// ID returns the topic's id (used in handles).
func (t *Topic) ID() TopicID { return t.id }

// Subjects returns the topic's capture filters without a copy (a
// permission check per settle must not allocate); they never change, and
// the caller must not modify them.
func (t *Topic) Subjects() []string { return t.cfg.Subjects }

// Config returns the topic's configuration with defaults filled in.
func (t *Topic) Config() TopicConfig {
	c := t.cfg
	c.Subjects = append([]string(nil), c.Subjects...)
	if c.DuplicateWindowMs != nil {
		w := *c.DuplicateWindowMs
		c.DuplicateWindowMs = &w
	}
	return c
}

// partFor picks the partition: xxhash64(key) % P with a key, else round robin.
func (t *Topic) partFor(key []byte) *partition {
	n := uint64(len(t.parts))
	if n == 1 {
		return t.parts[0]
	}
	if len(key) > 0 {
		return t.parts[xxhash.Sum64(key)%n]
	}
	p := t.parts[t.rr.Add(1)%n]
	if p.role.rep != nil && !p.servedNow() {
		// Replicated: an unkeyed publish goes to a partition served here
		// when there is one (role.go, PublishTarget).
		for i := uint64(1); i < n; i++ {
			if q := t.parts[(uint64(p.idx)+i)%n]; q.servedNow() {
				return q
			}
		}
	}
	return p
}

// unsettled returns the topic's messages stored and not settled by every
// group, and their bytes (see sizeLedger).
func (t *Topic) unsettled() (msgs, bytes int64) {
	for _, p := range t.parts {
		msgs += p.st.unsettled.Load()
		bytes += p.st.unsetBytes.Load()
	}
	return msgs, bytes
}

// limited reports whether the topic has max_unsettled_* limits.
func (t *Topic) limited() bool { return t.cfg.MaxUnsettledMsgs > 0 || t.cfg.MaxUnsettledBytes > 0 }

// full reports whether a one-byte message would not fit under the topic's
// max_unsettled_* limits now.
func (t *Topic) full() bool {
	if !t.limited() {
		return false
	}
	t.resMu.Lock()
	defer t.resMu.Unlock()
	return !t.fitsLocked(1)
}

// fitsLocked reports whether one more message of size bytes stays within
// max_unsettled_*, counting the reservations (t.resMu held).
func (t *Topic) fitsLocked(size int64) bool {
	msgs, bytes := t.unsettled()
	msgs += t.resMsgs
	bytes += t.resBytes
	return (t.cfg.MaxUnsettledMsgs == 0 || msgs+1 <= t.cfg.MaxUnsettledMsgs) &&
		(t.cfg.MaxUnsettledBytes == 0 || bytes+size <= t.cfg.MaxUnsettledBytes)
}

// reserve takes a place for one message of size bytes under the topic's
// max_unsettled_* limits, or reports false when it would pass them. The
// partitions count a message only once their actor has appended it; the
// reservation covers the time in between, so concurrent publishers (on
// other partitions, or many in one batch) cannot overshoot. Topics without
// limits reserve nothing (reserved false).
func (t *Topic) reserve(size int64) (reserved, ok bool) {
	if !t.limited() {
		return false, true
	}
	t.resMu.Lock()
	defer t.resMu.Unlock()
	if !t.fitsLocked(size) {
		return false, false
	}
	t.resMsgs++
	t.resBytes += size
	return true, true
}

// unreserve gives back reservations: their messages are now counted by
// their partition, or were never stored.
func (t *Topic) unreserve(msgs, bytes int64) {
	t.resMu.Lock()
	t.resMsgs -= msgs
	t.resBytes -= bytes
	t.resMu.Unlock()
	if t.space.waiting() {
		t.space.broadcast()
	}
}

func (t *Topic) prepare(m *Message) (command, error) {
	if m.Subject == "" {
		return command{}, fmt.Errorf("%w: empty subject", ErrInvalid)
	}
	if !utf8.ValidString(m.Subject) {
		return command{}, fmt.Errorf("publish to %s: %w: subject %q is not valid UTF-8", t.name, ErrInvalid, m.Subject)
	}
	// Refuse here what the log would refuse, so one oversized message
	// cannot fail the whole batch it would be appended with.
	if len(m.Subject) > maxSubject || int64(len(m.Header)+len(m.Data)) > t.maxBody() {
		return command{}, fmt.Errorf("publish to %s: %w: %d bytes, subject %d bytes", t.name, ErrTooLarge, len(m.Header)+len(m.Data), len(m.Subject))
	}
	if err := t.checkTTLHeader(m.Header); err != nil {
		return command{}, fmt.Errorf("publish to %s: %w", t.name, err)
	}
	if err := t.checkDelayHeaders(m.Header); err != nil {
		return command{}, fmt.Errorf("publish to %s: %w", t.name, err)
	}
	// One pass over the bytes, on the publisher's goroutine: it checks the
	// producer's checksum and is the record's data CRC (the actor's log
	// stores it instead of computing it again).
	crc := crc32.Update(crc32.ChecksumIEEE(m.Header), crc32.IEEETable, m.Data)
	if m.CRC != 0 && crc != m.CRC {
		return command{}, fmt.Errorf("publish to %s: %w", t.name, ErrCRCMismatch)
	}
	id, err := t.msgIDOf(m.Header, m.noDedup)
	if err != nil {
		return command{}, err
	}
	if m.ExpectLastMsgID != "" && t.cfg.dupWindowNs() == 0 {
		return command{}, fmt.Errorf("publish to %s: %w: an expected last message id needs the duplicate window on", t.name, ErrInvalid)
	}
	if err := t.checkStream(m.Expect); err != nil {
		return command{}, err
	}
	var expect *Expect
	if m.Expect != nil && (m.Expect.HasLastSeq || m.Expect.HasSubjectSeq) {
		e := *m.Expect
		expect = &e
	}
	body, buf := t.b.bodies.get(len(m.Header) + len(m.Data))
	body = append(append(body, m.Header...), m.Data...)
	return command{kind: cmdPublish, subject: m.Subject, hdrLen: len(m.Header), body: body, buf: buf, crc: crc, id: id, expectLast: m.ExpectLastMsgID, expect: expect}, nil
}

// PublishAsync stores m without blocking. It returns ErrQueueFull (not
// wrapped) at once when the partition's ring is full, ErrTopicFull when the topic is over
// its unsettled limits, ErrClosed after Close; then done is never called.
// Otherwise done is called exactly once, on the partition's actor goroutine
// (so it must be quick), after the message is durable under the topic's
// policy or the append failed. m is copied: its buffers may be reused once
// PublishAsync returns.
func (t *Topic) PublishAsync(m Message, done func(Position, error)) error {
	return t.PublishAsyncTo(m, PublishFunc(done))
}

// PublishDone receives the outcome of a PublishAsyncTo.
type PublishDone interface {
	PublishDone(Position, error)
}

// PublishFunc makes a function a PublishDone.
type PublishFunc func(Position, error)

// PublishDone calls f.
func (f PublishFunc) PublishDone(pos Position, err error) { f(pos, err) }

// PublishAsyncTo is PublishAsync reporting to done's method, so that a
// caller with an object per publish already (a server's answer slot) needs
// no closure as well.
func (t *Topic) PublishAsyncTo(m Message, done PublishDone) error {
	size := int64(len(m.Header) + len(m.Data))
	reserved, ok := t.reserve(size)
	if !ok {
		return fmt.Errorf("publish to %s: %w", t.name, ErrTopicFull)
	}
	c, err := t.prepare(&m)
	if err != nil {
		if reserved {
			t.unreserve(1, size)
		}
		return err
	}
	c.pubDone, c.reserved = done, reserved
	c.recv = m.Received
	t.b.opts.Stages.Since(stagetime.Enqueued, m.Received) // before the push: the actor may take it at once
	if err := t.partForPub(m.Key, &c).push(&c); err != nil {
		if reserved {
			t.unreserve(1, size)
		}
		if err == ErrQueueFull {
			return ErrQueueFull // hot under overload: not wrapped, no allocation
		}
		return fmt.Errorf("publish to %s: %w", t.name, err)
	}
	return nil
}

// Publish stores m and returns its position once durable under the topic's
// policy. When the topic is full it waits for room (full_policy block, at
// most block_timeout_ms, then ErrTopicFull) or fails with ErrTopicFull at
// once (reject); when the partition's ring is full it
// waits. Waiting ends with ctx. If ctx ends after the message was handed to
// the partition, Publish returns ctx's error and the message may still be
// stored.
func (t *Topic) Publish(ctx context.Context, m Message) (Position, error) {
	size := int64(len(m.Header) + len(m.Data))
	reserved, ok := t.reserve(size)
	if !ok {
		if t.cfg.FullPolicy == FullReject {
			return Position{}, fmt.Errorf("publish to %s: %w", t.name, ErrTopicFull)
		}
		if err := t.waitForRoom(ctx, size, &reserved); err != nil {
			return Position{}, err
		}
	}
	c, err := t.prepare(&m)
	if err != nil {
		if reserved {
			t.unreserve(1, size)
		}
		return Position{}, err
	}
	type result struct {
		pos Position
		err error
	}
	ch := make(chan result, 1)
	c.pubDone = PublishFunc(func(pos Position, err error) { ch <- result{pos, err} })
	c.reserved = reserved
	p := t.partForPub(m.Key, &c)
	if err := pushWait(ctx, p, &c); err != nil {
		if reserved {
			t.unreserve(1, size)
		}
		return Position{}, fmt.Errorf("publish to %s: %w", t.name, err)
	}
	select {
	case r := <-ch:
		return r.pos, r.err
	case <-ctx.Done():
		return Position{}, fmt.Errorf("publish to %s: %w", t.name, ctx.Err())
	}
}

// waitForRoom waits (full_policy block) until a message of size bytes
// fits under max_unsettled_* and reserves its place, at most the topic's
// block_timeout_ms: then it fails with ErrTopicFull. A closed topic ends
// the wait without a reservation (the push then says ErrClosed).
func (t *Topic) waitForRoom(ctx context.Context, size int64, reserved *bool) error {
	bound := time.Duration(t.cfg.BlockTimeoutMs) * time.Millisecond
	if bound <= 0 {
		bound = DefaultBlockTimeoutMs * time.Millisecond
	}
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	err := t.space.waitUntil(wctx, func() bool {
		if t.parts[0].box.closed.Load() {
			return true
		}
		r, ok := t.reserve(size)
		*reserved = r
		return ok
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() == nil:
		return fmt.Errorf("publish to %s: %w: still full after block_timeout_ms %d", t.name, ErrTopicFull, t.cfg.BlockTimeoutMs)
	}
	return fmt.Errorf("publish to %s: waiting for room: %w", t.name, err)
}

// pushWait pushes c, waiting with ctx while the ring is full.
func pushWait(ctx context.Context, p *partition, c *command) error {
	err := p.push(c)
	if err != ErrQueueFull {
		return err
	}
	return p.box.room.waitUntil(ctx, func() bool {
		err = p.push(c)
		return err != ErrQueueFull
	})
}

// TopicInfo describes a topic; numbers are a recent, not atomic, view.
type TopicInfo struct {
	Name       TopicName       `json:"name"`
	ID         TopicID         `json:"id"`
	Config     TopicConfig     `json:"config"`
	Partitions []PartitionInfo `json:"partitions"`
	Messages   int64           `json:"messages"`  // retained
	Unsettled  int64           `json:"unsettled"` // not settled by every group
	Bytes      int64           `json:"bytes"`     // of retained messages (header + payload)
	// UnsettledBytes are the bytes of the Unsettled messages (what
	// max_unsettled_bytes limits).
	UnsettledBytes int64       `json:"unsettled_bytes"`
	Groups         []GroupName `json:"groups"`
	// Published counts messages stored since the broker opened.
	Published uint64 `json:"published"`
	// DiskBytes is the size of the topic's files (segments are
	// preallocated, so this is mostly whole segments).
	DiskBytes int64 `json:"disk_bytes"`
}

// PartitionInfo describes one partition.
type PartitionInfo struct {
	FirstSeq Seq `json:"first_seq"`
	LastSeq  Seq `json:"last_seq"`
	// Partition is the partition's index.
	Partition Partition `json:"partition"`
	// Messages retained, Unsettled by some group, and their bytes.
	Messages       int64 `json:"messages"`
	Unsettled      int64 `json:"unsettled"`
	Bytes          int64 `json:"bytes"`
	UnsettledBytes int64 `json:"unsettled_bytes"`
	// Published counts messages stored since the broker opened.
	Published uint64 `json:"published"`
	// DiskBytes is the size of the partition's files.
	DiskBytes int64 `json:"disk_bytes"`
	// RestoredEvents counts the consumer-state events (deliveries, acks,
	// nacks) that the broker's Open put back into the event log from
	// their side copies in the data log: events a crash or power cut took
	// from the event log after they were confirmed. Non-zero after an
	// unclean stop only; it says the side copies did their job.
	RestoredEvents uint64 `json:"restored_events"`
}

// Info returns the topic's description without waiting for its actors.
func (t *Topic) Info() TopicInfo {
	in := TopicInfo{Name: t.name, ID: t.id, Config: t.Config()}
	for _, p := range t.parts {
		pi := p.st.info()
		pi.Partition, pi.DiskBytes = p.idx, p.diskBytes()
		if p.role.rep != nil && !p.servedNow() {
			// Served elsewhere: the actor keeps no state here, the
			// replicated log holds what is committed (role.go).
			first, last := p.data.Bounds()
			pi.FirstSeq, pi.LastSeq, pi.Messages = first, last, 0
			if last >= first && last > 0 {
				pi.Messages = int64(last - first + 1)
			}
		}
		in.Partitions = append(in.Partitions, pi)
		in.Messages += pi.Messages
		in.Unsettled += pi.Unsettled
		in.Bytes += pi.Bytes
		in.UnsettledBytes += pi.UnsettledBytes
		in.Published += pi.Published
		in.DiskBytes += pi.DiskBytes
	}
	t.b.mu.Lock()
	for name := range t.groups {
		if !name.internal() {
			in.Groups = append(in.Groups, name)
		}
	}
	t.b.mu.Unlock()
	sortNames(in.Groups)
	return in
}
