package protocol

// This file implements SPEC.md section 9: the ack handle and the settle
// bodies published to it.

// Handle is an ack handle: it names one delivery attempt of one message to one
// durable group. On the wire (the reply-to slot of a delivery, the argument of
// ACK/NACK/REJECT/EXTEND) it is
//
//	$F.<topic-id>.<group-id>.<partition>.<seq>.<attempt>
//
// in canonical decimal (no sign, no leading zeros). It is a valid NATS
// subject, so a stock NATS client can publish a settle body to it. Attempt is
// the delivery count (1 on the first delivery).
type Handle struct {
	Topic     uint64 // server-assigned topic id, >= 1, never reused
	Group     uint64 // server-assigned group id, >= 1, never reused
	Partition uint32 // partition index, from 0
	Seq       uint64 // sequence number in the partition, >= 1
	Attempt   uint32 // delivery count, >= 1
}

// HandlePrefix starts every ack handle subject.
const HandlePrefix = "$F."

// MaxHandleLen is the longest a handle can be on the wire.
const MaxHandleLen = len(HandlePrefix) + 20 + 1 + 20 + 1 + 10 + 1 + 20 + 1 + 10

// Valid reports whether every field is in range (ids, seq and attempt >= 1).
func (h Handle) Valid() bool {
	return h.Topic >= 1 && h.Group >= 1 && h.Seq >= 1 && h.Attempt >= 1
}

// Append appends the wire form of h to dst and returns the extended slice.
func (h Handle) Append(dst []byte) []byte {
	dst = append(dst, HandlePrefix...)
	dst = appendUint(dst, h.Topic)
	dst = append(dst, '.')
	dst = appendUint(dst, h.Group)
	dst = append(dst, '.')
	dst = appendUint(dst, uint64(h.Partition))
	dst = append(dst, '.')
	dst = appendUint(dst, h.Seq)
	dst = append(dst, '.')
	return appendUint(dst, uint64(h.Attempt))
}

// String returns the wire form of h.
func (h Handle) String() string { return string(h.Append(make([]byte, 0, MaxHandleLen))) }

// IsHandleSubject reports whether subject starts with "$F.", the prefix
// reserved for ack handles. It does not check the rest (ParseHandle does).
func IsHandleSubject(subject []byte) bool {
	return len(subject) >= len(HandlePrefix) && string(subject[:len(HandlePrefix)]) == HandlePrefix
}

// ParseHandle parses the wire form of a handle. It does not allocate on
// success. It returns an *Error with CodeInvalidHandle when b is not a
// canonical handle with every field in range.
func ParseHandle(b []byte) (Handle, error) {
	h, ok := parseHandle(b)
	if !ok {
		return Handle{}, &Error{Code: CodeInvalidHandle, Detail: quoteDetail(b)}
	}
	return h, nil
}

func parseHandle(b []byte) (Handle, bool) {
	if !IsHandleSubject(b) {
		return Handle{}, false
	}
	b = b[len(HandlePrefix):]
	var f [5]uint64
	limits := [5]uint64{maxUint64, maxUint64, maxUint32, maxUint64, maxUint32}
	for i := range f {
		end := len(b)
		if i < 4 {
			end = indexDot(b)
			if end < 0 {
				return Handle{}, false
			}
		}
		tok := b[:end]
		if len(tok) == 0 || len(tok) > 1 && tok[0] == '0' {
			return Handle{}, false
		}
		v, st := parseUint(tok, limits[i])
		if st != numOK {
			return Handle{}, false
		}
		f[i] = v
		if i < 4 {
			b = b[end+1:]
		}
	}
	h := Handle{Topic: f[0], Group: f[1], Partition: uint32(f[2]), Seq: f[3], Attempt: uint32(f[4])}
	return h, h.Valid()
}

func indexDot(b []byte) int {
	for i, c := range b {
		if c == '.' {
			return i
		}
	}
	return -1
}

// AckKind is what a settle body published to a handle subject asks for.
type AckKind uint8

// The settle bodies (as in JetStream).
const (
	AckAck      AckKind = iota + 1 // "+ACK": done
	AckNak                         // "-NAK" or "-NAK {"delay":<ns>}": redeliver (after delay)
	AckProgress                    // "+WPI": work in progress, extend the lease
	AckTerm                        // "+TERM": do not redeliver (dead-letter as rejected)
)

// String returns the body that asks for k.
func (k AckKind) String() string {
	switch k {
	case AckAck:
		return "+ACK"
	case AckNak:
		return "-NAK"
	case AckProgress:
		return "+WPI"
	case AckTerm:
		return "+TERM"
	}
	return "AckKind(?)"
}

// ParseAckBody parses the payload of a PUB to a handle subject. An empty
// payload means +ACK (as JetStream). delayNanos is the -NAK delay in
// nanoseconds (0 when absent). It returns an *Error with CodeInvalidAck for
// any other body.
func ParseAckBody(payload []byte) (kind AckKind, delayNanos int64, err error) {
	p := trimSpace(payload)
	switch {
	case len(p) == 0 || string(p) == "+ACK":
		return AckAck, 0, nil
	case string(p) == "+WPI":
		return AckProgress, 0, nil
	case string(p) == "+TERM" || hasPrefix(p, "+TERM "):
		return AckTerm, 0, nil
	case string(p) == "-NAK":
		return AckNak, 0, nil
	case hasPrefix(p, "-NAK "):
		d, ok := parseNakDelay(trimSpace(p[len("-NAK "):]))
		if !ok {
			return 0, 0, &Error{Code: CodeInvalidAck, Detail: quoteDetail(payload)}
		}
		return AckNak, d, nil
	}
	return 0, 0, &Error{Code: CodeInvalidAck, Detail: quoteDetail(payload)}
}

// parseNakDelay accepts exactly {"delay":<ns>} with optional spaces.
func parseNakDelay(p []byte) (int64, bool) {
	const key = `"delay"`
	if len(p) < 2 || p[0] != '{' || p[len(p)-1] != '}' {
		return 0, false
	}
	p = trimSpace(p[1 : len(p)-1])
	if !hasPrefix(p, key) {
		return 0, false
	}
	p = trimSpace(p[len(key):])
	if len(p) == 0 || p[0] != ':' {
		return 0, false
	}
	p = trimSpace(p[1:])
	v, st := parseUint(p, maxInt64)
	if st != numOK {
		return 0, false
	}
	return int64(v), true
}

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && (isSpace(b[len(b)-1]) || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}
