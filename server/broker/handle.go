package broker

import (
	"fmt"
	"math"

	"github.com/fibrilmq/fibril/wire"
)

// ParseHandle parses an ack handle subject "$F.<topic>.<group>.<partition>.
// <seq>.<attempt>" in the canonical form Handle.String writes (the format
// is wire.Handle's, SPEC.md 9.1: no leading zeros, ids, seq and attempt at
// least 1). It returns an error wrapping ErrInvalid for anything else,
// including topic and group ids this engine cannot have assigned (above
// 2^32-1); s is not retained.
func ParseHandle(s string) (Handle, error) {
	h, ok := wire.ParseHandle(s)
	if !ok {
		return Handle{}, fmt.Errorf("%w: handle %q is not $F.<topic>.<group>.<partition>.<seq>.<attempt> in canonical decimal", ErrInvalid, s)
	}
	if h.Topic > math.MaxUint32 || h.Group > math.MaxUint32 {
		return Handle{}, fmt.Errorf("%w: handle %q: topic or group id above %d", ErrInvalid, s, uint32(math.MaxUint32))
	}
	return Handle{Topic: TopicID(h.Topic), Group: GroupID(h.Group), Partition: Partition(h.Partition), Seq: Seq(h.Seq), Attempt: h.Attempt}, nil
}

// toWire returns h in the wire package's form.
func (h Handle) toWire() wire.Handle {
	return wire.Handle{Topic: uint64(h.Topic), Group: uint64(h.Group), Partition: uint32(h.Partition), Seq: uint64(h.Seq), Attempt: h.Attempt}
}
