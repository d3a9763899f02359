package broker

import (
	"encoding/binary"
	"fmt"
)

// Event kinds of the per-partition event log. Each event log record holds
// the events of one actor round, back to back: kind byte, group id, offset
// and one argument, all uvarints; when the kind byte has evHasOwner set, an
// owner id (uvarint) follows the argument.
//
// Format history (old logs must keep replaying):
//   - v1: kinds 1-5, no owner, evSettle's argument always 0.
//   - v2: evHasOwner on evDeliver (who got it) and on the settles done by
//     a consumer; evSettle's argument says how (settleHow*); kinds 6-8
//     record lease ends that return an offset to ready. Replay ignores the
//     owner and kinds 6-8 (leases are not persisted).
//   - v3: kind 9 (evDefer), a delayed message held back.
//   - v4: kind 10 (evLease), a lease's deadline, written by replicated
//     partitions only, so that a new leader keeps the leases of the
//     deliveries in flight (their lease ends, kinds 6-8, then end it).
const (
	evDeliver    byte = 1 // arg: the new delivery count
	evSettle     byte = 2 // arg: settleHow* (0 in v1 logs: not recorded)
	evDeadLetter byte = 3 // arg: reason; copy to the dead-letter topic is due
	evInit       byte = 4 // group created: offset is where it starts
	// evPurge: everything below offset is settled (Topic.Purge); with
	// group id 0 it is the partition's purge floor.
	evPurge   byte = 5
	evNack    byte = 6 // nacked by its consumer; arg: redelivery delay, ns
	evExpire  byte = 7 // lease ran out; arg: the delivery count
	evRelease byte = 8 // its consumer's owner was released (connection closed); arg: the delivery count
	// evDefer: a delayed message's head was reached before it was due
	// (delay.go): offset is held back, never delivered, until arg (unix
	// ns); replay keeps it pending so that it is neither lost behind the
	// group's head nor handed out early.
	evDefer byte = 9
	// evLease: offset's delivery is leased until arg (unix ns) to the
	// principal in the owner field: after evDeliver and at each EXTEND,
	// in replicated partitions only.
	evLease byte = 10

	evLastKind = evLease
	// evHasOwner flags a kind byte whose event carries an owner id.
	evHasOwner byte = 0x80
)

// How an evSettle settled its offset (its argument).
const (
	settleUnknown      uint64 = 0 // v1 logs
	settleAck          uint64 = 1 // acked by its consumer
	settleDeadLettered uint64 = 2 // its dead-letter copy is durable (or there was none to make)
	settleDropped      uint64 = 3 // retention removed the record before delivery
	settleLost         uint64 = 4 // damage destroyed the record; a repair recorded it (lost.go)
	settleFiltered     uint64 = 5 // the group's subject filter does not match the record (filter.go)
	settleExpired      uint64 = 6 // its TTL ran out before delivery, on_expiry drop (ttl.go)
	settleRequeued     uint64 = 7 // a selective requeue moved it, perhaps ahead of the group's head (requeue_select.go)
)

// event is one decoded event log entry.
type event struct {
	kind  byte // without evHasOwner
	group GroupID
	seq   Seq
	arg   uint64
	owner OwnerID // 0: none recorded
}

func appendEvent(b []byte, e event) []byte {
	k := e.kind
	if e.owner != 0 {
		k |= evHasOwner
	}
	b = append(b, k)
	b = binary.AppendUvarint(b, uint64(e.group))
	b = binary.AppendUvarint(b, uint64(e.seq))
	b = binary.AppendUvarint(b, e.arg)
	if e.owner != 0 {
		b = binary.AppendUvarint(b, uint64(e.owner))
	}
	return b
}

// decodeEvents calls fn for each event in one record (v1 or v2).
func decodeEvents(b []byte, fn func(e event)) error {
	for len(b) > 0 {
		kind := b[0] &^ evHasOwner
		hasOwner := b[0]&evHasOwner != 0
		if kind < evDeliver || kind > evLastKind {
			return fmt.Errorf("%w: event kind %d", ErrCorruptState, b[0])
		}
		b = b[1:]
		var v [4]uint64
		n := 3
		if hasOwner {
			n = 4
		}
		for i := range n {
			x, w := binary.Uvarint(b)
			if w <= 0 {
				return fmt.Errorf("%w: truncated event", ErrCorruptState)
			}
			v[i] = x
			b = b[w:]
		}
		fn(event{kind: kind, group: GroupID(v[0]), seq: Seq(v[1]), arg: v[2], owner: OwnerID(v[3])})
	}
	return nil
}
