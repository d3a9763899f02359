package broker

import (
	"fmt"

	"github.com/fibrilmq/fibril/wire"
)

// offState is where a delivered, not yet settled offset stands.
type offState uint8

const (
	stReady         offState = iota // waiting for redelivery
	stInflight                      // leased to a consumer until deadline
	stDelayed                       // nacked with a delay; ready at deadline
	stDeadLettering                 // being copied to the dead-letter topic
)

// Dead-letter reasons, persisted in events and snapshots.
const (
	reasonNone          uint8 = 0
	reasonMaxDeliveries uint8 = 1
	reasonRejected      uint8 = 2
	reasonExpired       uint8 = 3 // its TTL ran out before delivery (ttl.go)
)

func reasonText(r uint8) string {
	switch r {
	case reasonRejected:
		return "rejected"
	case reasonExpired:
		return "expired"
	}
	return "max_deliveries"
}

// pendingOff is the state of one offset that was delivered at least once and
// is not settled.
type pendingOff struct {
	attempts uint32
	state    offState
	reason   uint8 // dead-letter reason while stDeadLettering
	// holder is the principal the current attempt was delivered to; it
	// outlives the lease (a NACK, an expiry, a release on close) until the
	// next delivery, so only that identity settles this attempt's handle.
	holder   Principal
	deadline int64 // lease end (inflight) or not-before (delayed), unix ns
	owner    OwnerID
	sub      *Subscription // push subscription holding the credit, or nil
}

// deadLetter is an offset whose copy to the dead-letter topic is due.
type deadLetter struct {
	seq      Seq
	attempts uint32
	reason   uint8
}

// groupState is one consumer group's state machine in one partition. It is
// pure: no I/O, no goroutines, time passed in. It appends the events that
// must be persisted to *ev and the dead-letter work to dlq; the partition
// actor writes and runs them.
//
// Invariants: an offset is settled (in acks), pending (delivered, with a
// state) or never delivered (>= next and not pending) — never two of these;
// only never-delivered and stReady offsets are handed out.
type groupState struct {
	id            GroupID
	leaseNs       int64
	maxDeliveries int     // -1: unlimited
	backoffNs     []int64 // redelivery delays by delivery count (GroupConfig.BackoffMs); shared, never written
	// ordered: at most one offset out at a time, the lowest unsettled
	// (GroupConfig.Ordered "partition"; takeOrdered).
	ordered bool
	// keys: the key bookkeeping of a group ordered by key, nil otherwise
	// (GroupConfig.Ordered "key"; keyorder.go).
	keys *keyOrder

	next Seq // lowest offset never delivered
	// damaged: the lowest offset whose record could not be read (0:
	// none). Nothing at or past it is handed out until the partition is
	// opened again (an operator restored or repaired the data): a
	// damaged record is never settled in the group's name.
	damaged     Seq
	acks        ackSet
	pending     map[Seq]pendingOff
	ready       seqHeap   // stReady candidates, validated lazily
	timers      timerHeap // lease ends and nack delays, validated lazily
	dlq         []deadLetter
	nInflight   int
	peakPending int           // high-water mark of pending, for shrinking the map
	cnt         GroupCounters // over the group's life: in snapshots, recounted by apply

	ev *evSink // event sink (nil: events are dropped, e.g. while replaying)
	// durableLeases: the partition is replicated, so leases are recorded
	// (evLease) and a new leader keeps them (restored).
	durableLeases bool
}

// evSink collects the events of one actor round. cuts marks where records
// are split so that no event record grows past chunk bytes (plus one
// event).
type evSink struct {
	b     []byte
	n     int
	cuts  []int
	from  int // start of the current chunk
	chunk int // 0: evChunk
}

// evChunk bounds one event log record; smaller event segments bound it
// lower (evChunkFor): a record must fit in a segment.
const evChunk = 8 << 10

// evChunkFor is the chunk bound for event segments of segSize bytes: room
// for the segment and record headers, the record's meta and the one event
// a chunk may pass its bound by.
func evChunkFor(segSize int64) int {
	return int(min(evChunk, segSize-256))
}

func newGroupState(id GroupID, leaseNs int64, maxDeliveries int, start Seq) *groupState {
	if start == 0 {
		start = 1
	}
	return &groupState{
		id: id, leaseNs: leaseNs, maxDeliveries: maxDeliveries,
		next: start, acks: newAckSet(start), pending: map[Seq]pendingOff{},
	}
}

// stateFor is group g's state machine in one partition, starting at
// start, with the rules its configuration sets.
func stateFor(g *Group, start Seq) *groupState {
	gs := newGroupState(g.id, g.cfg.LeaseMs*1e6, g.cfg.MaxDeliveries, start)
	gs.backoffNs = g.cfg.backoffNs()
	gs.ordered = g.cfg.Ordered == wire.OrderPartition
	if g.cfg.Ordered == wire.OrderKey {
		gs.keys = newKeyOrder()
	}
	return gs
}

// fresh is an empty state machine with g's rules, starting at start (a
// snapshot's or an init event's).
func (g *groupState) fresh(start Seq) *groupState {
	n := newGroupState(g.id, g.leaseNs, g.maxDeliveries, start)
	n.backoffNs, n.ordered = g.backoffNs, g.ordered
	if g.keys != nil {
		n.keys = newKeyOrder()
		n.keys.max = g.keys.max
	}
	return n
}

func (g *groupState) emit(kind byte, seq Seq, arg uint64) { g.emitBy(kind, seq, arg, 0) }

// emitBy emits an event naming the owner it concerns (0: none).
func (g *groupState) emitBy(kind byte, seq Seq, arg uint64, owner OwnerID) {
	if e := g.ev; e != nil {
		limit := e.chunk
		if limit == 0 {
			limit = evChunk
		}
		if len(e.b)-e.from >= limit {
			e.cuts = append(e.cuts, len(e.b))
			e.from = len(e.b)
		}
		e.b = appendEvent(e.b, event{kind: kind, group: g.id, seq: seq, arg: arg, owner: owner})
		e.n++
	}
}

// take returns the next offset to deliver, at most last: the lowest stReady
// redelivery first, then (ordered by key) the lowest freed offset, then
// the lowest never-delivered offset. It does not change state; deliver
// does.
func (g *groupState) take(last Seq) (Seq, bool) {
	if g.damaged != 0 {
		last = min(last, g.damaged-1)
	}
	if g.ordered {
		return g.takeOrdered(last)
	}
	if s, ok := g.takeReady(last); ok {
		return s, true
	}
	if g.keys != nil {
		if s, ok := g.takeFreed(last); ok {
			return s, true
		}
		// After a restart next restarts at the frontier (keysRestored):
		// the pending offsets it meets are not never-delivered ones.
		for {
			g.next = g.acks.nextUnsettled(g.next)
			if _, ok := g.pending[g.next]; !ok {
				break
			}
			g.next++
		}
	}
	g.next = g.acks.nextUnsettled(g.next)
	if g.next <= last {
		return g.next, true
	}
	return 0, false
}

// takeReady returns the lowest stReady redelivery, at most last.
func (g *groupState) takeReady(last Seq) (Seq, bool) {
	for {
		s, ok := g.ready.peek()
		if !ok {
			return 0, false
		}
		if p, ok := g.pending[s]; ok && p.state == stReady {
			return s, s <= last // past last: beyond a damaged record
		}
		g.ready.pop() // stale entry
	}
}

// takeOrdered is take for an ordered group: the lowest unsettled offset,
// and only while nothing is out. An offset once delivered stays pending
// until settled, so while any is pending (leased, delayed, being
// dead-lettered, or ready again after a NACK, an expiry or a release)
// only the lowest of them can be handed out, and only when it is ready;
// with none pending it is the lowest never-delivered offset. Ordered
// groups hold at most one pending offset, but the lowest is looked for
// all the same.
func (g *groupState) takeOrdered(last Seq) (Seq, bool) {
	if len(g.pending) > 0 {
		var head Seq
		for s := range g.pending {
			if head == 0 || s < head {
				head = s
			}
		}
		if p := g.pending[head]; p.state == stReady && head <= last {
			return head, true
		}
		return 0, false
	}
	g.next = g.acks.nextUnsettled(g.next)
	if g.next <= last {
		return g.next, true
	}
	return 0, false
}

// readyBound is at least how many offsets up to last take could return
// now (ready redeliveries plus never-delivered offsets), for sizing an
// answer; it is at least 1.
func (g *groupState) readyBound(last Seq) int {
	n := len(g.ready)
	if g.keys != nil {
		n += len(g.keys.freed)
	}
	if last >= g.next {
		n += int(min(last-g.next+1, 1<<20))
	}
	return max(n, 1)
}

// deliver leases seq (returned by take) and returns its new attempt number.
func (g *groupState) deliver(seq Seq, now int64, owner OwnerID, holder Principal, sub *Subscription) uint32 {
	p, ok := g.pending[seq]
	if ok {
		if s, ok := g.ready.peek(); ok && s == seq {
			g.ready.pop()
		}
	} else if seq >= g.next {
		g.next = seq + 1
	}
	p.attempts++
	g.cnt.Delivered++
	if p.attempts > 1 {
		g.cnt.Redelivered++
	}
	p.state = stInflight
	p.deadline = now + g.leaseNs
	p.owner = owner
	p.holder = holder
	p.sub = sub
	g.pending[seq] = p
	g.nInflight++
	g.timers.push(timerEntry{at: p.deadline, seq: seq, attempt: p.attempts})
	g.emitBy(evDeliver, seq, uint64(p.attempts), owner)
	if g.durableLeases {
		g.emitBy(evLease, seq, uint64(p.deadline), OwnerID(p.holder))
	}
	if len(g.pending) > g.peakPending {
		g.peakPending = len(g.pending)
	}
	return p.attempts
}

// compact bounds the memory of settled offsets: lease timers of acked
// deliveries stay in the heap until they would have fired, and Go maps do
// not shrink, so both are rebuilt when mostly stale. The checks are O(1);
// a rebuild is O(pending) and happens at most once per that many changes.
func (g *groupState) compact() {
	if len(g.timers) > 2*len(g.pending)+4096 {
		g.rebuildTimers()
	}
	if len(g.ready) > 2*len(g.pending)+4096 {
		g.rebuildReady()
	}
	if k := g.keys; k != nil {
		if len(k.freed) > 2*len(k.heads)+4096 {
			g.rebuildFreed()
		}
		k.compact()
	}
	if g.peakPending > 1<<16 && len(g.pending) < g.peakPending/8 {
		g.rebuildPending()
	}
}

func (g *groupState) rebuildTimers() {
	var kept timerHeap
	for _, e := range g.timers {
		if p, ok := g.pending[e.seq]; ok && p.attempts == e.attempt && p.deadline == e.at &&
			(p.state == stInflight || p.state == stDelayed) {
			kept = append(kept, e)
		}
	}
	kept.init()
	g.timers = kept
}

func (g *groupState) rebuildReady() {
	var kept seqHeap
	for _, s := range g.ready {
		if p, ok := g.pending[s]; ok && p.state == stReady {
			kept = append(kept, s)
		}
	}
	kept.init()
	g.ready = kept
}

func (g *groupState) rebuildFreed() {
	var kept seqHeap
	for _, s := range g.keys.freed {
		if _, pend := g.pending[s]; !pend && g.keys.holds(s) && !g.acks.contains(s) {
			kept = append(kept, s)
		}
	}
	kept.init()
	g.keys.freed = kept
}

func (g *groupState) rebuildPending() {
	m := make(map[Seq]pendingOff, len(g.pending))
	for s, p := range g.pending {
		m[s] = p
	}
	g.pending = m
	g.peakPending = len(m)
}

// stopAt records that seq's record is damaged: take hands out nothing at
// or past it any more. It reports whether this is news (a lower offset
// than any damage known so far).
func (g *groupState) stopAt(seq Seq) bool {
	if g.damaged != 0 && g.damaged <= seq {
		return false
	}
	g.damaged = seq
	return true
}

// dropLost settles seq without delivering it: damage destroyed its record
// (lost.go). Unlike drop it leaves next alone: offsets before seq may never
// have been delivered.
func (g *groupState) dropLost(seq Seq) {
	if p, ok := g.pending[seq]; ok {
		g.endLease(seq, p)
		delete(g.pending, seq)
	}
	if g.acks.add(seq) {
		g.emit(evSettle, seq, settleLost)
	}
	g.unhold(seq)
}

// drop settles seq without delivering it (its record is gone: retention).
func (g *groupState) drop(seq Seq) {
	p, pend := g.pending[seq]
	if pend {
		g.endLease(seq, p)
		delete(g.pending, seq)
	}
	g.passOver(seq, pend)
	if g.acks.add(seq) {
		g.emit(evSettle, seq, settleDropped)
	}
	g.unhold(seq)
}

// passOver moves next past seq, an offset take gave, unless it was
// pending: a group ordered by key restarts next below its pending
// offsets (keysRestored), and moving it past one would pass over the
// never-delivered offsets between.
func (g *groupState) passOver(seq Seq, pending bool) {
	if !pending && seq >= g.next {
		g.next = seq + 1
	}
}

// filtered settles seq, the next never-delivered offset, without
// delivering it: the group's subject filter does not match its record.
func (g *groupState) filtered(seq Seq) {
	if seq >= g.next {
		g.next = seq + 1
	}
	if g.acks.add(seq) {
		g.emit(evSettle, seq, settleFiltered)
	}
	g.unhold(seq)
}

// endLease releases the lease bookkeeping of an inflight offset.
func (g *groupState) endLease(seq Seq, p pendingOff) {
	if p.state != stInflight {
		return
	}
	g.nInflight--
	if p.sub != nil {
		p.sub.returnCredit()
	}
}

// requeue moves an offset that left Inflight (nack, expiry, release) to
// ready, delayed, or dead-lettering when it reached max deliveries.
func (g *groupState) requeue(seq Seq, p pendingOff, now, delay int64) {
	g.endLease(seq, p)
	p.owner, p.sub = 0, nil
	switch {
	case g.maxDeliveries > 0 && p.attempts >= uint32(g.maxDeliveries):
		g.toDeadLetter(seq, p, reasonMaxDeliveries, 0)
		return
	case delay > 0:
		p.state = stDelayed
		p.deadline = now + delay
		g.timers.push(timerEntry{at: p.deadline, seq: seq, attempt: p.attempts})
	default:
		p.state = stReady
		g.ready.push(seq)
	}
	g.pending[seq] = p
}

// retryDelay is the backoff after delivery attempts of an offset: the
// schedule's entry for it, its last entry past its end, 0 without one.
// Delays are not persisted (as a NACK's): after a restart the offset is
// ready at once.
func (g *groupState) retryDelay(attempts uint32) int64 {
	if len(g.backoffNs) == 0 {
		return 0
	}
	return g.backoffNs[min(max(int(attempts), 1), len(g.backoffNs))-1]
}

// toDeadLetter starts dead-lettering seq; by is the consumer that rejected
// it (0 for max deliveries).
func (g *groupState) toDeadLetter(seq Seq, p pendingOff, reason uint8, by OwnerID) {
	p.state = stDeadLettering
	p.reason = reason
	g.pending[seq] = p
	g.dlq = append(g.dlq, deadLetter{seq: seq, attempts: p.attempts, reason: reason})
	g.emitBy(evDeadLetter, seq, uint64(reason), by)
}

// deadLettered settles seq once its dead-letter copy is durable.
func (g *groupState) deadLettered(seq Seq) {
	if p, ok := g.pending[seq]; !ok || p.state != stDeadLettering {
		return
	}
	delete(g.pending, seq)
	g.cnt.DeadLettered++
	if g.acks.add(seq) {
		g.emit(evSettle, seq, settleDeadLettered)
	}
	g.unhold(seq)
}

// settle applies a settle operation for (seq, attempt) and reports whether
// the operation is refused.
func (g *groupState) settle(seq Seq, attempt uint32, op SettleOp, now int64) error {
	if op.Kind < SettleAck || op.Kind > SettleExtend {
		return fmt.Errorf("%w: settle kind %d", ErrInvalid, op.Kind)
	}
	if seq == 0 || attempt == 0 {
		// no delivery ever has offset 0 or attempt 0
		return fmt.Errorf("%w: offset %d attempt %d", ErrUnknownHandle, seq, attempt)
	}
	if g.acks.contains(seq) {
		if op.Kind == SettleExtend {
			return fmt.Errorf("%w: offset %d already settled", ErrNotInflight, seq)
		}
		return nil // idempotent: settled is final
	}
	p, ok := g.pending[seq]
	if !ok {
		return fmt.Errorf("%w: offset %d was not delivered to group %d", ErrUnknownHandle, seq, g.id)
	}
	if attempt != p.attempts {
		if attempt < p.attempts {
			return fmt.Errorf("%w: attempt %d, offset %d is at delivery %d", ErrStaleHandle, attempt, seq, p.attempts)
		}
		return fmt.Errorf("%w: attempt %d, offset %d is at delivery %d", ErrUnknownHandle, attempt, seq, p.attempts)
	}
	if op.Principal != 0 && p.holder != 0 && op.Principal != p.holder {
		return fmt.Errorf("%w: offset %d attempt %d", ErrNotHolder, seq, attempt)
	}
	if p.state == stDeadLettering {
		if op.Kind == SettleExtend {
			return fmt.Errorf("%w: offset %d is being dead-lettered", ErrNotInflight, seq)
		}
		return nil
	}
	switch op.Kind {
	case SettleAck:
		g.cnt.Acked++
		g.endLease(seq, p)
		delete(g.pending, seq)
		g.acks.add(seq)
		g.emitBy(evSettle, seq, settleAck, p.owner)
		g.unhold(seq)
	case SettleNack:
		if p.state == stInflight {
			g.cnt.Nacked++
			g.emitBy(evNack, seq, uint64(max(op.Delay, 0)), p.owner)
			delay := int64(op.Delay)
			if delay <= 0 {
				delay = g.retryDelay(p.attempts)
			}
			g.requeue(seq, p, now, delay)
		}
	case SettleReject:
		g.cnt.Rejected++
		g.endLease(seq, p)
		by := p.owner
		p.owner, p.sub = 0, nil
		g.toDeadLetter(seq, p, reasonRejected, by)
	case SettleExtend:
		if p.state != stInflight {
			return fmt.Errorf("%w: offset %d lease ended", ErrNotInflight, seq)
		}
		d := int64(op.Delay)
		if d <= 0 {
			d = g.leaseNs
		}
		p.deadline = now + d
		g.pending[seq] = p
		g.timers.push(timerEntry{at: p.deadline, seq: seq, attempt: p.attempts})
		if g.durableLeases {
			g.emitBy(evLease, seq, uint64(p.deadline), OwnerID(p.holder))
		}
	default:
		return fmt.Errorf("%w: settle kind %d", ErrInvalid, op.Kind)
	}
	return nil
}

// expire ends every lease and nack delay due at now.
func (g *groupState) expire(now int64) {
	for {
		e, ok := g.timers.peek()
		if !ok || e.at > now {
			return
		}
		g.timers.pop()
		p, ok := g.pending[e.seq]
		if !ok || p.attempts != e.attempt || p.deadline != e.at {
			continue // settled, redelivered or extended since
		}
		switch p.state {
		case stInflight:
			g.cnt.Expired++
			g.emitBy(evExpire, e.seq, uint64(p.attempts), p.owner)
			g.requeue(e.seq, p, now, g.retryDelay(p.attempts))
		case stDelayed:
			p.state = stReady
			g.pending[e.seq] = p
			g.ready.push(e.seq)
		}
	}
}

// nextDeadline returns the earliest pending timer (0 if none).
func (g *groupState) nextDeadline() int64 {
	e, ok := g.timers.peek()
	if !ok {
		return 0
	}
	return e.at
}

// release puts every lease held by owner back to ready at once.
func (g *groupState) release(owner OwnerID, now int64) {
	for seq, p := range g.pending {
		if p.state == stInflight && p.owner == owner {
			g.emitBy(evRelease, seq, uint64(p.attempts), owner)
			g.requeue(seq, p, now, 0)
		}
	}
}

// releaseSub ends the credit link of a closed subscription; its leases stay
// until settled or expired.
func (g *groupState) releaseSub(s *Subscription) {
	for seq, p := range g.pending {
		if p.sub == s {
			p.sub = nil
			g.pending[seq] = p
		}
	}
}

// truncatedTo marks everything below first settled: retention removed it.
func (g *groupState) truncatedTo(first Seq) {
	if g.acks.frontier >= first {
		return
	}
	g.acks.advanceTo(first)
	for seq, p := range g.pending {
		if seq < first {
			g.endLease(seq, p)
			delete(g.pending, seq)
		}
	}
	if g.next < first {
		g.next = first
	}
	g.keysTruncatedTo(first)
	// dead letters below first can no longer be copied
	k := 0
	for _, d := range g.dlq {
		if d.seq >= first {
			g.dlq[k] = d
			k++
		}
	}
	g.dlq = g.dlq[:k]
}

// clampTo forgets deliveries of offsets above last, the end of the data
// log as recovered. Records are written and leased in the same round and
// the two logs are fsynced in parallel (a delivery is answered only once
// both are durable), so a crash can leave the event log recording the
// delivery of a record the data log lost; that offset is then published
// again later and must count as never delivered.
func (g *groupState) clampTo(last Seq) {
	for seq := range g.pending {
		if seq > last {
			delete(g.pending, seq)
		}
	}
	if g.next > last+1 {
		g.next = max(last+1, g.acks.frontier)
	}
}

// restored is called after replay: every pending offset is ready again
// (dead letters stay due), except, in a replicated partition, one whose
// replayed lease (evLease) ends after now: a new leader keeps it leased.
func (g *groupState) restored(now int64) {
	g.ready = g.ready[:0]
	g.timers = g.timers[:0]
	g.dlq = g.dlq[:0]
	g.nInflight = 0
	for seq, p := range g.pending {
		leasedUntil, holder := p.deadline, p.holder // an evLease replayed (replicated partitions only)
		p.owner, p.sub, p.deadline, p.holder = 0, nil, 0, 0
		if g.durableLeases && p.state != stDeadLettering && leasedUntil > now && p.attempts > 0 {
			// Still leased: the principal it was leased to may settle it
			// until the lease ends (no owner: no connection here holds it).
			p.state, p.deadline, p.holder = stInflight, leasedUntil, holder
			g.nInflight++
			g.timers.push(timerEntry{at: p.deadline, seq: seq, attempt: p.attempts})
		} else if p.state == stDeadLettering {
			g.dlq = append(g.dlq, deadLetter{seq: seq, attempts: p.attempts, reason: p.reason})
		} else if g.maxDeliveries > 0 && p.attempts >= uint32(g.maxDeliveries) {
			p.state = stDeadLettering
			p.reason = reasonMaxDeliveries
			g.dlq = append(g.dlq, deadLetter{seq: seq, attempts: p.attempts, reason: p.reason})
		} else {
			p.state = stReady
			g.ready.push(seq)
		}
		g.pending[seq] = p
	}
	g.keysRestored()
}

// apply replays one persisted event. It counts the event in cnt as the
// live transition did, so counters survive a restart: the snapshot holds
// them up to its event, apply adds the events after it.
func (g *groupState) apply(kind byte, seq Seq, arg uint64) {
	g.count(kind, arg)
	switch kind {
	case evDeliver:
		if g.acks.contains(seq) {
			return
		}
		p := g.pending[seq]
		if uint32(arg) > p.attempts {
			p.attempts = uint32(arg)
		}
		if p.state != stDeadLettering {
			p.state = stReady
		}
		g.pending[seq] = p
		if seq >= g.next {
			g.next = seq + 1
		}
	case evSettle:
		delete(g.pending, seq)
		g.acks.add(seq)
		if seq >= g.next && arg != settleLost && arg != settleRequeued {
			// A lost or requeued offset may lie past offsets never
			// delivered: take finds those through the acks, next stays.
			g.next = seq + 1
		}
	case evPurge:
		g.truncatedTo(seq)
	case evNack, evExpire, evRelease:
		if p, ok := g.pending[seq]; ok { // the lease ended
			p.deadline, p.holder = 0, 0
			g.pending[seq] = p
		}
	case evDefer:
		if g.acks.contains(seq) {
			return
		}
		if _, ok := g.pending[seq]; !ok {
			g.pending[seq] = pendingOff{state: stReady} // restored() readies it; deliverable holds it back again
		}
		if seq >= g.next {
			g.next = seq + 1
		}
	case evDeadLetter:
		if g.acks.contains(seq) {
			return
		}
		p := g.pending[seq]
		p.state = stDeadLettering
		p.reason = uint8(arg)
		g.pending[seq] = p
		if seq >= g.next { // an expired offset is dead-lettered undelivered
			g.next = seq + 1
		}
	}
}

// applyLease replays an evLease: seq is leased until deadline (unix ns)
// to holder.
func (g *groupState) applyLease(seq Seq, deadline int64, holder Principal) {
	if p, ok := g.pending[seq]; ok && p.state != stDeadLettering {
		p.deadline, p.holder = deadline, holder
		g.pending[seq] = p
	}
}

// count adds a replayed event to the counters, as the transition that
// wrote it counted it.
func (g *groupState) count(kind byte, arg uint64) {
	switch kind {
	case evDeliver:
		g.cnt.Delivered++
		if arg > 1 {
			g.cnt.Redelivered++
		}
	case evSettle:
		switch arg {
		case settleAck:
			g.cnt.Acked++
		case settleDeadLettered:
			g.cnt.DeadLettered++
		}
	case evNack:
		g.cnt.Nacked++
	case evExpire:
		g.cnt.Expired++
	case evDeadLetter:
		if uint8(arg) == reasonRejected {
			g.cnt.Rejected++
		}
	}
}

// unsettledFrom returns the lowest offset not settled by this group.
func (g *groupState) frontier() Seq { return g.acks.frontier }
