package broker

// Publish de-duplication (SPEC.md 10.1 duplicate_window_ms, 7.5). A
// publish whose header carries a message id (wire.HeaderMsgID,
// Nats-Msg-Id) is stored once per partition within the topic's duplicate
// window: a later publish with the same id is not appended but confirmed
// with the original's position, marked Duplicate.
//
// The ids live in dedupIndex, in the actor's memory, and nowhere else on
// disk: the data log is the durable record. Each stored record keeps its
// header block and the round's time, and a record is fsynced before its
// publish is confirmed, so after a restart or a power cut the index is
// rebuilt from the records of the window's tail (loadDuplicates, at the
// first round that meets an id, or the first retention pass that would
// delete records): whatever was confirmed is found again.
// A duplicate is confirmed in the round that meets it, so its answer
// waits, like every completion, for its round's batch, which covers the
// original's record.
//
// The index is bounded by the topic's duplicate_max_ids: at the bound the
// oldest id is forgotten before its window ends, and a later publish with it is
// stored as new. Under workqueue retention a record whose id is
// remembered stays on disk (settled, never delivered again) until its id
// is forgotten, so the window holds across restarts; a limit
// (max_msgs, max_bytes, max_age_ms) or a purge may still remove it, and
// then its id is gone after the next restart.
//
// With several partitions a publish with an id and no key is routed by
// its id (xxhash64(id) % partitions), so its duplicates meet it.
//
// The index also knows the id of the partition's last record, for
// Message.ExpectLastMsgID (JetStream's Nats-Expected-Last-Msg-Id): a
// publish expecting another is failed in the round, before it is
// appended, after the duplicate check.

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/fibrilmq/fibril/server/seglog"
	"github.com/fibrilmq/fibril/wire"
)

// msgIDSpan locates a publish's message id within its command's body
// (the header block comes first); n 0: none.
type msgIDSpan struct{ at, n uint32 }

// of returns the id's bytes in body.
func (s msgIDSpan) of(body []byte) []byte { return body[s.at : s.at+s.n] }

// fillDuplicates gives the de-duplication fields their defaults (a nil
// window, or a catalog written before the fields). The window is copied:
// the topic never shares the caller's pointer.
func (c *TopicConfig) fillDuplicates() {
	w := int64(wire.DefaultDuplicateWindowMs)
	if c.DuplicateWindowMs != nil {
		w = *c.DuplicateWindowMs
	}
	c.DuplicateWindowMs = &w
	if c.DuplicateMaxIDs == 0 {
		c.DuplicateMaxIDs = wire.DefaultDuplicateMaxIDs
	}
}

// checkDuplicates fills and checks the de-duplication fields.
func (c *TopicConfig) checkDuplicates() error {
	c.fillDuplicates()
	if w := *c.DuplicateWindowMs; w < 0 || w > maxLeaseMs {
		return fmt.Errorf("%w: duplicate_window_ms %d out of range [0, %d]", ErrInvalid, w, maxLeaseMs)
	}
	if n := c.DuplicateMaxIDs; n < 1 || n > wire.MaxDuplicateMaxIDs {
		return fmt.Errorf("%w: duplicate_max_ids %d out of range [1, %d]", ErrInvalid, n, wire.MaxDuplicateMaxIDs)
	}
	return nil
}

// dupWindowNs is the duplicate window in nanoseconds (0: off).
func (c *TopicConfig) dupWindowNs() int64 {
	if c.DuplicateWindowMs == nil {
		return wire.DefaultDuplicateWindowMs * 1e6
	}
	return *c.DuplicateWindowMs * 1e6
}

// msgIDOf finds the message id in a publish's header block, when the
// topic de-duplicates. An id longer than wire.MaxMsgIDLen is refused.
func (t *Topic) msgIDOf(hdr []byte, skip bool) (msgIDSpan, error) {
	if len(hdr) == 0 || skip || t.cfg.dupWindowNs() == 0 {
		return msgIDSpan{}, nil
	}
	v, ok := wire.HeaderValue(hdr, wire.HeaderMsgID)
	if !ok || len(v) == 0 {
		return msgIDSpan{}, nil
	}
	if len(v) > wire.MaxMsgIDLen {
		return msgIDSpan{}, fmt.Errorf("publish to %s: %w: %s of %d bytes, at most %d", t.name, ErrMsgIDTooLong, wire.HeaderMsgID, len(v), wire.MaxMsgIDLen)
	}
	at := cap(hdr) - cap(v) // v is a sub-slice of hdr (HeaderValue)
	if at < 0 || at+len(v) > len(hdr) {
		return msgIDSpan{}, fmt.Errorf("publish to %s: %s not within the header block", t.name, wire.HeaderMsgID)
	}
	return msgIDSpan{at: uint32(at), n: uint32(len(v))}, nil
}

// partForPub is partFor with a publish's message id standing in for a
// missing key, so that the duplicates of a message meet it.
func (t *Topic) partForPub(key []byte, c *command) *partition {
	if len(key) == 0 && c.id.n > 0 {
		key = c.id.of(c.body)
	}
	return t.partFor(key)
}

// dedupRec is a remembered id, in the order remembered: where its record
// is and when it was stored. pend >= 0: the record is publish pend of the
// round being written (seq not known yet).
type dedupRec struct {
	id   string
	seq  Seq
	at   int64
	pend int32
}

// dedupIndex (actor) is a partition's remembered message ids: at most max,
// none older than window before the round's time. A pure structure; the
// partition's glue below feeds it.
//
// The records are a queue, oldest first, each with a number (base plus
// its place in fifo); the map takes an id to the number of its live
// record. A record the map no longer names (forgotten after a failed
// append, or remembered again) is skipped when the queue passes it.
type dedupIndex struct {
	window int64 // ns
	max    int
	ids    map[string]uint64
	fifo   []dedupRec // live from head on
	head   int
	base   uint64 // the number of fifo[0]
	// dropped counts ids forgotten at the bound before their window ended.
	dropped uint64
	// loaded: the ids of the records stored before this open are in.
	loaded bool
	// round: how many records the round being written added (the
	// queue's last ones, in order), settled by settle.
	round int
	// dups: the round's duplicates of its own publishes, answered once
	// the round's append is known.
	dups []roundDup
	// last is the message id of the partition's last record ("" when it
	// had none), for Message.ExpectLastMsgID; lastBefore is last before
	// the round being written, restored when its append fails.
	last, lastBefore string
}

// roundDup is a publish that repeats the id of publish pend of its round.
type roundDup struct {
	done PublishDone
	pend int32
}

func newDedupIndex(windowNs int64, max int) dedupIndex {
	if max < 1 {
		max = wire.DefaultDuplicateMaxIDs
	}
	return dedupIndex{window: windowNs, max: max, ids: map[string]uint64{}}
}

// len returns how many ids are remembered.
func (x *dedupIndex) len() int { return len(x.ids) }

// live reports whether the record numbered n is the one the map names.
func (x *dedupIndex) live(n uint64, r *dedupRec) bool {
	m, ok := x.ids[r.id]
	return ok && m == n
}

// expire forgets the ids stored before now-window.
func (x *dedupIndex) expire(now int64) {
	cutoff := now - x.window
	for x.head < len(x.fifo) && x.fifo[x.head].at < cutoff {
		x.pop()
	}
	x.compact()
}

// pop forgets the oldest record of the queue; it reports whether that
// record was live.
func (x *dedupIndex) pop() bool {
	r, n := &x.fifo[x.head], x.base+uint64(x.head)
	live := x.live(n, r)
	if live {
		delete(x.ids, r.id)
	}
	*r = dedupRec{}
	x.head++
	return live
}

// compact gives back the queue's consumed front once it is half of it.
func (x *dedupIndex) compact() {
	if x.head > 64 && x.head*2 >= len(x.fifo) {
		n := copy(x.fifo, x.fifo[x.head:])
		clear(x.fifo[n:])
		x.fifo, x.base, x.head = x.fifo[:n], x.base+uint64(x.head), 0
	}
}

// lookup returns the record remembered for id, if stored at or after
// now-window.
func (x *dedupIndex) lookup(id []byte, now int64) (dedupRec, bool) {
	n, ok := x.ids[string(id)] // no allocation
	if !ok {
		return dedupRec{}, false
	}
	r := x.fifo[n-x.base] // live records are at or after head
	if r.at < now-x.window {
		return dedupRec{}, false
	}
	return r, true
}

// add remembers id for the record at seq (pend < 0) or for publish pend
// of the round being written (then settle must follow), stored at at; at
// the bound the oldest id goes first.
func (x *dedupIndex) add(id string, seq Seq, at int64, pend int32) {
	for len(x.fifo)-x.head >= x.max {
		if x.pop() {
			x.dropped++
		}
	}
	x.compact()
	x.ids[id] = x.base + uint64(len(x.fifo))
	x.fifo = append(x.fifo, dedupRec{id: id, seq: seq, at: at, pend: pend})
	if pend >= 0 {
		x.round++
	}
}

// settle gives the round's pending ids their sequence numbers (first: the
// first record of the round), or forgets them when the append failed.
func (x *dedupIndex) settle(first Seq, failed bool) {
	// The round's ids were the last records queued, in order (nothing
	// else adds during a round); the bound may have passed some already.
	from := max(len(x.fifo)-x.round, x.head)
	for i := from; i < len(x.fifo); i++ {
		r := &x.fifo[i]
		if r.pend < 0 {
			continue
		}
		if failed {
			if x.live(x.base+uint64(i), r) {
				delete(x.ids, r.id) // the record stays, dead, until popped
			}
			continue
		}
		r.seq, r.pend = first+Seq(r.pend), -1
	}
	x.round = 0
}

// oldest returns the lowest offset whose id is remembered (ok false: none).
func (x *dedupIndex) oldest() (Seq, bool) {
	for i := x.head; i < len(x.fifo); i++ {
		if r := &x.fifo[i]; r.pend < 0 && x.live(x.base+uint64(i), r) {
			return r.seq, true
		}
	}
	return 0, false
}

// takeDuplicates (appendData, before the append) answers the round's
// publishes whose id the partition stored within the window, with the
// original's position, fails those whose conditions do not hold
// (ExpectLastMsgID is not the last id, or Expect, expect.go), and leaves
// the others in p.in.pubs. It returns false when none is left to append.
// Duplicates of a publish of the same round are answered by appendedIDs.
func (p *partition) takeDuplicates() bool {
	dedup := p.t.cfg.dupWindowNs() != 0
	x := &p.dedup
	x.lastBefore = x.last
	cond := slices.ContainsFunc(p.in.pubs, func(c *command) bool { return c.expect != nil })
	if !cond && (!dedup || !slices.ContainsFunc(p.in.pubs, func(c *command) bool { return c.id.n > 0 || c.expectLast != "" })) {
		x.last = "" // the round's last record has no id
		return true
	}
	if dedup {
		if !x.loaded {
			p.loadDuplicates()
			x.lastBefore = x.last
		}
		x.expire(p.now)
	}
	if !p.subjects.loaded && needsSubjects(p.in.pubs) {
		p.loadSubjects()
	}
	kept := p.in.pubs[:0]
	for _, c := range p.in.pubs {
		var id []byte
		if dedup && c.id.n > 0 {
			id = c.id.of(c.body)
			if e, ok := x.lookup(id, p.now); ok {
				if e.pend >= 0 {
					x.dups = append(x.dups, roundDup{done: c.pubDone, pend: e.pend})
				} else {
					p.commit.confirm(c.pubDone, Position{Partition: p.idx, Seq: e.seq, Duplicate: true})
				}
				p.dropPub(c)
				continue
			}
		}
		err := p.checkExpect(c, len(kept))
		if err == nil && c.expectLast != "" && c.expectLast != x.last {
			err = fmt.Errorf("publish to %s partition %d: %w", p.t.name, p.idx, &LastMsgIDError{Last: x.last})
		}
		if err != nil {
			done := c.pubDone
			p.commit.onCommit(func() { done.PublishDone(Position{}, err) })
			p.dropPub(c)
			continue
		}
		x.last = ""
		if id != nil {
			s := string(id)
			x.add(s, 0, p.now, int32(len(kept)))
			x.last = s
		}
		p.notedKept(c, len(kept))
		kept = append(kept, c)
	}
	clear(p.in.pubs[len(kept):])
	p.in.pubs = kept
	if len(kept) == 0 {
		x.settle(0, false)
		return false
	}
	return true
}

// dropPub gives back the buffer of a publish that is not appended (its
// answer is queued).
func (p *partition) dropPub(c *command) {
	p.t.b.bodies.put(c.buf)
	c.buf, c.body, c.pubDone = nil, nil, nil
}

// appendedIDs (appendData, after the append) gives the round's new ids
// their offsets from first and answers the round's duplicates of its own
// publishes, or on err forgets the ids and fails those duplicates too.
func (p *partition) appendedIDs(first Seq, err error) {
	x := &p.dedup
	if err != nil {
		x.last = x.lastBefore
	}
	if x.round == 0 && len(x.dups) == 0 {
		return
	}
	x.settle(first, err != nil)
	for i, d := range x.dups {
		if err != nil {
			done := d.done
			p.commit.onCommit(func() { done.PublishDone(Position{}, err) })
		} else {
			p.commit.confirm(d.done, Position{Partition: p.idx, Seq: first + Seq(d.pend), Duplicate: true})
		}
		x.dups[i] = roundDup{}
	}
	x.dups = x.dups[:0]
}

// loadDuplicates rebuilds the index from the data log: the ids of the
// records stored within the window before now, found by a binary search
// over the records' timestamps and a scan from there. Records that cannot
// be read (a range a repair lost) are skipped.
func (p *partition) loadDuplicates() {
	x := &p.dedup
	*x = newDedupIndex(p.t.cfg.dupWindowNs(), int(p.t.cfg.DuplicateMaxIDs))
	x.loaded = true
	defer func() { x.dropped = 0 }() // ids of before the open are not this run's
	first, last := p.data.Bounds()
	if first > last {
		return
	}
	from, err := p.firstStoredAtOrAfter(p.now-x.window, first)
	if err != nil {
		from = first // unreadable records: scan them all, skipping those
	}
	var hdrErr error
	for at := from; at <= last; {
		was := at
		err := p.data.Scan(at, 1<<20, func(r seglog.Record) bool {
			at = r.Seq + 1
			if r.Time < p.now-x.window {
				return true
			}
			h, _, err := decodeMeta(r.Meta)
			if err != nil || h > len(r.Data) {
				hdrErr = fmt.Errorf("record %d: %w", r.Seq, cmpErr(err))
				return true
			}
			v, ok := wire.HeaderValue(r.Data[:h], wire.HeaderMsgID)
			if ok && len(v) > 0 && len(v) <= wire.MaxMsgIDLen {
				x.add(string(v), r.Seq, r.Time, -1)
			}
			return true
		})
		if err != nil && at == was {
			at++ // skip the record that cannot be read
		}
	}
	if r, err := p.data.Read(last); err == nil {
		if h, _, err := decodeMeta(r.Meta); err == nil && h <= len(r.Data) {
			if v, ok := wire.HeaderValue(r.Data[:h], wire.HeaderMsgID); ok && len(v) <= wire.MaxMsgIDLen {
				x.last = string(v)
			}
		}
	} else {
		hdrErr = cmp.Or(hdrErr, fmt.Errorf("last record %d: %w", last, err))
	}
	if hdrErr != nil {
		p.t.b.logf("topic %s partition %d: duplicate ids: %v", p.t.name, p.idx, hdrErr)
	}
}

// cmpErr names a header length past the record when decodeMeta had none.
func cmpErr(err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: header length past the record", ErrCorruptState)
}

// dedupKeep lowers a workqueue retention cut to the oldest record whose id
// is remembered, so that a restart within its window finds it again.
func (p *partition) dedupKeep(cut Seq) Seq {
	if p.t.cfg.Retention != RetentionWorkqueue || p.t.cfg.dupWindowNs() == 0 || cut <= p.first {
		return cut
	}
	if !p.dedup.loaded {
		p.loadDuplicates() // the first pass after an open: what to keep is on disk
	}
	p.dedup.expire(p.now)
	if s, ok := p.dedup.oldest(); ok && s < cut {
		return s
	}
	return cut
}
