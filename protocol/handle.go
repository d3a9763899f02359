package protocol

import "github.com/fibrilmq/fibril/wire"

// This file implements SPEC.md section 9: the ack handle and the settle
// bodies published to it.

// Handle is an ack handle (SPEC.md 9.1): it names one delivery attempt of
// one message to one durable group. On the wire it is
//
//	$F.<topic-id>.<group-id>.<partition>.<seq>.<attempt>
//
// The format (Append, String, Valid) is wire.Handle's, shared with the
// broker.
type Handle = wire.Handle

// HandlePrefix starts every ack handle subject.
const HandlePrefix = wire.HandlePrefix

// MaxHandleLen is the longest a handle can be on the wire.
const MaxHandleLen = wire.MaxHandleLen

// IsHandleSubject reports whether subject starts with "$F.", the prefix
// reserved for ack handles. It does not check the rest (ParseHandle does).
func IsHandleSubject(subject []byte) bool { return wire.IsHandle(subject) }

// ParseHandle parses the wire form of a handle. It does not allocate on
// success. It returns an *Error with CodeInvalidHandle when b is not a
// canonical handle with every field in range.
func ParseHandle(b []byte) (Handle, error) {
	h, ok := wire.ParseHandle(b)
	if !ok {
		return Handle{}, &Error{Code: CodeInvalidHandle, Detail: quoteDetail(b)}
	}
	return h, nil
}

// parseHandle is ParseHandle without the error value, for the parser.
func parseHandle(b []byte) (Handle, bool) { return wire.ParseHandle(b) }

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
