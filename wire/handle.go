package wire

// This file implements SPEC.md section 9.1: the ack handle format.

// Handle is an ack handle: it names one delivery attempt of one message to
// one durable group. On the wire (the reply-to slot of a delivery, the
// argument of ACK/NACK/REJECT/EXTEND) it is
//
//	$F.<topic-id>.<group-id>.<partition>.<seq>.<attempt>
//
// in canonical decimal (no sign, no leading zeros). It is a valid subject,
// so a stock NATS client can publish a settle body to it. Attempt is the
// delivery count (1 on the first delivery).
type Handle struct {
	Topic     uint64 // server-assigned topic id, >= 1, never reused
	Group     uint64 // server-assigned group id, >= 1, never reused
	Partition uint32 // partition index, from 0
	Seq       uint64 // sequence number in the partition, >= 1
	Attempt   uint32 // delivery count, >= 1
}

// HandlePrefix starts every ack handle subject.
const HandlePrefix = ReservedPrefix + "F."

// MaxHandleLen is the longest a handle can be on the wire.
const MaxHandleLen = len(HandlePrefix) + 20 + 1 + 20 + 1 + 10 + 1 + 20 + 1 + 10

// Valid reports whether every field is in range (ids, seq and attempt >= 1).
func (h Handle) Valid() bool {
	return h.Topic >= 1 && h.Group >= 1 && h.Seq >= 1 && h.Attempt >= 1
}

// Append appends the wire form of h to dst and returns the extended slice.
func (h Handle) Append(dst []byte) []byte {
	dst = append(dst, HandlePrefix...)
	dst = AppendUint(dst, h.Topic)
	dst = append(dst, '.')
	dst = AppendUint(dst, h.Group)
	dst = append(dst, '.')
	dst = AppendUint(dst, uint64(h.Partition))
	dst = append(dst, '.')
	dst = AppendUint(dst, h.Seq)
	dst = append(dst, '.')
	return AppendUint(dst, uint64(h.Attempt))
}

// String returns the wire form of h.
func (h Handle) String() string {
	var buf [MaxHandleLen]byte
	return string(h.Append(buf[:0]))
}

// IsHandle reports whether subject starts with "$F.", the prefix reserved
// for ack handles. It does not check the rest (ParseHandle does).
func IsHandle[T Text](subject T) bool { return hasPrefix(subject, HandlePrefix) }

// ParseHandle parses the wire form of a handle. It reports false when s is
// not a canonical handle with every field in range (Handle.Valid). It does
// not allocate.
func ParseHandle[T Text](s T) (Handle, bool) {
	if !IsHandle(s) {
		return Handle{}, false
	}
	s = s[len(HandlePrefix):]
	var f [5]uint64
	limits := [5]uint64{maxUint64, maxUint64, maxUint32, maxUint64, maxUint32}
	for i := range f {
		tok, rest, more := Cut(s)
		if more != (i < 4) {
			return Handle{}, false
		}
		if len(tok) > 1 && tok[0] == '0' {
			return Handle{}, false
		}
		v, ok := parseUint(tok, limits[i])
		if !ok {
			return Handle{}, false
		}
		f[i] = v
		s = rest
	}
	h := Handle{Topic: f[0], Group: f[1], Partition: uint32(f[2]), Seq: f[3], Attempt: uint32(f[4])}
	if !h.Valid() {
		return Handle{}, false
	}
	return h, true
}

const (
	maxUint64 = ^uint64(0)
	maxUint32 = uint64(1<<32 - 1)
)

// parseUint parses a non-empty run of ASCII digits no larger than max. It
// reports false for anything else, including overflow.
func parseUint[T Text](b T, max uint64) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(b); i++ {
		d := uint64(b[i]) - '0'
		if d > 9 || v > (maxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, v <= max
}

// AppendUint appends the decimal form of v (the one hand-written encoder
// of the wire's numbers; protocol uses it too).
func AppendUint(dst []byte, v uint64) []byte {
	var buf [20]byte
	i := len(buf)
	for v >= 10 {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	i--
	buf[i] = byte('0' + v)
	return append(dst, buf[i:]...)
}
