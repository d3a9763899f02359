package broker

import (
	"encoding/binary"
	"fmt"
)

// Event kinds of the per-partition event log. Each event log record holds
// the events of one actor round, back to back: kind byte, group id, offset
// and one argument, all uvarints.
const (
	evDeliver    byte = 1 // arg: the new delivery count
	evSettle     byte = 2 // acked, or its dead-letter copy is durable
	evDeadLetter byte = 3 // arg: reason; copy to the dead-letter topic is due
	evInit       byte = 4 // group created: offset is where it starts
	// evPurge: everything below offset is settled (Topic.Purge); with
	// group id 0 it is the partition's purge floor.
	evPurge byte = 5
)

func appendEvent(b []byte, kind byte, g GroupID, seq Seq, arg uint64) []byte {
	b = append(b, kind)
	b = binary.AppendUvarint(b, uint64(g))
	b = binary.AppendUvarint(b, uint64(seq))
	return binary.AppendUvarint(b, arg)
}

// decodeEvents calls fn for each event in one record.
func decodeEvents(b []byte, fn func(kind byte, g GroupID, seq Seq, arg uint64)) error {
	for len(b) > 0 {
		kind := b[0]
		if kind < evDeliver || kind > evPurge {
			return fmt.Errorf("%w: event kind %d", ErrCorruptState, kind)
		}
		b = b[1:]
		var v [3]uint64
		for i := range v {
			x, n := binary.Uvarint(b)
			if n <= 0 {
				return fmt.Errorf("%w: truncated event", ErrCorruptState)
			}
			v[i] = x
			b = b[n:]
		}
		fn(kind, GroupID(v[0]), Seq(v[1]), v[2])
	}
	return nil
}
