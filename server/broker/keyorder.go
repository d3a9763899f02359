package broker

// Key-ordered groups (SPEC.md 10.2, ordered "key"): in each partition at
// most one message per Fibril-Key of the group is out at a time (leased,
// waiting out a NACK delay, held back by a delay, or being dead-lettered),
// and it is the lowest unsettled offset of that key; different keys run in
// parallel.
//
// The key is the Fibril-Key header of the stored record (a Message.Key
// given without the header only picks the partition). A record without
// one, or with an empty one, is its own key: it is handed out like a
// record of an unordered group. Keys are compared by their xxhash64: two
// keys that share a hash share one slot, which costs them parallelism,
// never order.
//
// State, per group and partition (keyOrder):
//   - a slot per key that holds an offset: the offsets holding it (one;
//     more only if recovery met a state this code never writes) and the
//     offsets parked behind them, ascending;
//   - heads: each holding offset and its key. An offset holds its key
//     while it is pending, and from the moment the group's head reaches
//     it (deliverable claims the key) or it is promoted from the parking
//     queue (freed) until it is delivered;
//   - freed: promoted offsets not yet delivered, handed out by take
//     before any never-delivered offset.
//
// deliverable reads each never-delivered record the group's head reaches:
// when its key is held it is parked (next moves past it) and costs one of
// the round's filterScan reads; at keyParkMax parked offsets the group
// stops advancing (head-of-line: later keys wait until a parked offset
// is promoted; behind a message held back for an hour, an hour). When a holding offset settles (ack, dead letter, expiry,
// retention, damage) its key's lowest parked offset is promoted, so it
// goes out before any later offset of the key, and nothing is read again
// to find it. Slots and heads are bounded by the group's pending offsets
// plus the freed ones; parked offsets by keyParkMax.
//
// Nothing of this is persisted. After a restart (restored) the group's
// next never-delivered offset goes back to its frontier, so the parked
// offsets are met again (each read once, within the round bound), and
// the keys of the pending offsets are read from their records before any
// never-delivered offset is handed out (learnKeys). The recovered pending
// set is the state after some prefix of the event log, and every prefix
// holds at most one pending offset per key, so no key has two messages
// out after recovery.

import (
	"github.com/cespare/xxhash/v2"

	"github.com/fibrilmq/fibril/wire"
)

// keyParkMax bounds the offsets one key-ordered group parks in one
// partition (8 bytes each).
const keyParkMax = 1 << 14

// keyOrder is the key bookkeeping of a key-ordered group in one
// partition; groupState owns it and calls it.
type keyOrder struct {
	slots   map[uint64]*keySlot
	heads   map[Seq]uint64 // holding offset -> its key's hash
	freed   seqHeap        // promoted heads not yet delivered, validated lazily
	parked  int            // offsets in all slots' queues
	max     int            // bound on parked (keyParkMax; tests lower it)
	peak    int            // high-water mark of heads, for shrinking the maps
	unknown []Seq          // pending offsets whose keys are not read yet (after a restart)
}

// keySlot is one key that an offset holds.
type keySlot struct {
	out   int   // holding offsets
	queue []Seq // parked offsets, ascending
}

func newKeyOrder() *keyOrder {
	return &keyOrder{slots: map[uint64]*keySlot{}, heads: map[Seq]uint64{}, max: keyParkMax}
}

// keyHash is the hash of the record's Fibril-Key in its header block hdr;
// ok is false without a (non-empty) key.
func keyHash(hdr []byte) (h uint64, ok bool) {
	if len(hdr) == 0 {
		return 0, false
	}
	v, ok := wire.HeaderValue(hdr, wire.HeaderKey)
	if !ok || len(v) == 0 {
		return 0, false
	}
	return xxhash.Sum64(v), true
}

// holds reports whether seq holds its key.
func (k *keyOrder) holds(seq Seq) bool {
	_, ok := k.heads[seq]
	return ok
}

// hold makes seq a holder of key h.
func (k *keyOrder) hold(seq Seq, h uint64) {
	s := k.slots[h]
	if s == nil {
		s = &keySlot{}
		k.slots[h] = s
	}
	s.out++
	k.heads[seq] = h
	k.peak = max(k.peak, len(k.heads))
}

// keyVerdict is what claim says of a never-delivered offset.
type keyVerdict uint8

const (
	keyGo     keyVerdict = iota // it holds its key now, or has none: go on
	keyParked                   // its key is held: parked behind it
	keyWait                     // its key is held and the parking is full
)

// claim decides a never-delivered offset at the group's head, not yet
// holding a key, whose record has header block hdr.
func (k *keyOrder) claim(seq Seq, hdr []byte) keyVerdict {
	h, ok := keyHash(hdr)
	if !ok {
		return keyGo
	}
	s := k.slots[h]
	if s == nil {
		k.hold(seq, h)
		return keyGo
	}
	if k.parked >= k.max {
		return keyWait
	}
	s.queue = append(s.queue, seq)
	k.parked++
	return keyParked
}

// release ends seq's hold on its key (settled or gone: settled reports
// which offsets are). When it was the last holder, the key's lowest
// parked offset not settled holds it next and is freed; with none the
// slot goes.
func (k *keyOrder) release(seq Seq, settled func(Seq) bool) {
	h, ok := k.heads[seq]
	if !ok {
		return
	}
	delete(k.heads, seq)
	s := k.slots[h]
	if s.out--; s.out > 0 {
		return
	}
	for len(s.queue) > 0 {
		n := s.queue[0]
		s.queue = s.queue[1:]
		k.parked--
		if settled(n) {
			continue // lost to damage while parked
		}
		s.out = 1
		k.heads[n] = h
		k.freed.push(n) // heads did not grow: seq left it
		return
	}
	delete(k.slots, h)
}

// claimKey is claim for the never-delivered offset seq that take gave:
// parked, it is passed over (next moves past it).
func (g *groupState) claimKey(seq Seq, hdr []byte) keyVerdict {
	v := g.keys.claim(seq, hdr)
	if v == keyParked && seq >= g.next {
		g.next = seq + 1
	}
	return v
}

// compact rebuilds the maps once mostly empty (Go maps do not shrink),
// as groupState.compact does pending: O(1) to check, O(heads) at most
// once per that many releases.
func (k *keyOrder) compact() {
	if k.peak <= 1<<16 || len(k.heads) >= k.peak/8 {
		return
	}
	heads := make(map[Seq]uint64, len(k.heads))
	for s, h := range k.heads {
		heads[s] = h
	}
	slots := make(map[uint64]*keySlot, len(k.slots))
	for h, s := range k.slots {
		slots[h] = s
	}
	k.heads, k.slots, k.peak = heads, slots, len(heads)
}

// takeFreed returns the lowest freed offset still to deliver, at most
// last, dropping stale entries (delivered, held back or settled since).
func (g *groupState) takeFreed(last Seq) (Seq, bool) {
	k := g.keys
	for {
		s, ok := k.freed.peek()
		if !ok {
			return 0, false
		}
		if _, pend := g.pending[s]; !pend && k.holds(s) && !g.acks.contains(s) {
			return s, s <= last
		}
		k.freed.pop()
	}
}

// unhold is release for groupState: seq settled, or left the partition.
func (g *groupState) unhold(seq Seq) {
	if g.keys != nil {
		g.keys.release(seq, g.acks.contains)
	}
}

// keysTruncatedTo ends the holds below first (retention removed them,
// and acks holds everything below first).
func (g *groupState) keysTruncatedTo(first Seq) {
	if g.keys == nil {
		return
	}
	var gone []Seq
	for seq := range g.keys.heads {
		if seq < first {
			gone = append(gone, seq)
		}
	}
	for _, seq := range gone {
		g.unhold(seq)
	}
}

// keysRestored starts the key bookkeeping over after a replay: nothing
// holds a key until learnKeys has read the pending offsets' keys, and the
// scan for never-delivered offsets starts again at the frontier, where
// the offsets parked before the restart lie.
func (g *groupState) keysRestored() {
	if g.keys == nil {
		return
	}
	k := newKeyOrder()
	k.max = g.keys.max
	for seq := range g.pending {
		k.unknown = append(k.unknown, seq)
	}
	g.keys = k
	g.next = g.acks.frontier
}

// learnKeys (actor) reads the keys of gp's pending offsets after a
// restart, at most filterScan records per call; it reports whether all
// are known (until then deliverable hands nothing out). A record that
// cannot be read holds no key: it is never handed out (deliverOne drops
// it or stops the group at it), nor anything of its key after it.
func (p *partition) learnKeys(gp *groupPart) bool {
	k := gp.keys
	for n := 0; len(k.unknown) > 0; n++ {
		if n == filterScan {
			return false
		}
		seq := k.unknown[len(k.unknown)-1]
		k.unknown = k.unknown[:len(k.unknown)-1]
		if _, ok := gp.pending[seq]; !ok || k.holds(seq) {
			continue
		}
		rec, err := p.data.Read(seq)
		if err != nil {
			continue
		}
		hdrLen, _, err := decodeMetaReuse(rec.Meta, p.lastSubject)
		if err != nil || hdrLen > len(rec.Data) {
			continue
		}
		if h, ok := keyHash(rec.Data[:hdrLen]); ok {
			k.hold(seq, h)
		}
	}
	k.unknown = nil
	return true
}
