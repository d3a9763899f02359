package wire

// This file implements SPEC.md section 12: the NATS/1.0 header block of
// HPUB and HMSG (and of a stored message), and the names Fibril gives
// meaning to.

// HeaderPrefix starts every header block, optionally followed by a space
// and a status ("NATS/1.0 503").
const HeaderPrefix = "NATS/1.0"

// Header names Fibril reads or writes.
const (
	// HeaderKey routes an HPUB to partition xxhash64(key) % partitions.
	HeaderKey = "Fibril-Key"
	// HeaderMsgID is a producer-chosen message id: a topic stores a
	// message once per id within its duplicate window (NATS's own name,
	// as JetStream reads it).
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderTTL sets one message's TTL on a topic with allow_msg_ttl
	// (NATS's own name): whole seconds or a Go duration ("90s", "1h30m"),
	// more than 0 and at most MaxTTLMs, or "never" (no TTL, whatever the
	// topic's message_ttl_ms).
	HeaderTTL = "Nats-TTL"
	// HeaderDelay holds a message back from every group for a while after
	// it is stored, on a topic with allow_msg_delay: whole seconds or a Go
	// duration ("90s", "1h30m"), more than 0 and at most MaxTTLMs.
	HeaderDelay = "Fibril-Delay"
	// HeaderDeliverAt holds a message back until a time (RFC 3339), on a
	// topic with allow_msg_delay.
	HeaderDeliverAt = "Fibril-Deliver-At"
	// HeaderReason says why a message was dead-lettered: max_deliveries, rejected or expired.
	HeaderReason = "Fibril-Reason"
	// HeaderError is the detail a consumer gave when it rejected a dead letter.
	HeaderError = "Fibril-Error"
	// HeaderSubject is the original subject of a dead-lettered message.
	HeaderSubject = "Fibril-Subject"
	// HeaderPartition is the original partition of a dead-lettered message.
	HeaderPartition = "Fibril-Partition"
	// HeaderSeq is the original sequence number of a dead-lettered message.
	HeaderSeq = "Fibril-Seq"
	// HeaderDeliveries is how many times a dead-lettered message was delivered.
	HeaderDeliveries = "Fibril-Deliveries"
)

// ValidHeader reports whether h is a complete header block: "NATS/1.0",
// then a space or CRLF, and an empty line (CRLF CRLF) at the end.
func ValidHeader(h []byte) bool {
	const min = len(HeaderPrefix) + 4
	if len(h) < min || !hasPrefix(h, HeaderPrefix) {
		return false
	}
	if c := h[len(HeaderPrefix)]; c != ' ' && c != '\r' {
		return false
	}
	return string(h[len(h)-4:]) == "\r\n\r\n"
}

// AppendHeader appends a complete header block: "NATS/1.0", one
// "<key>: <value>" line per pair of kv, and the empty line. kv holds keys
// and values alternately; a trailing key without value gets an empty value.
// Keys must not hold ':' or white space and values no line ends.
func AppendHeader(dst []byte, kv ...string) []byte {
	dst = append(dst, HeaderPrefix+"\r\n"...)
	for i := 0; i < len(kv); i += 2 {
		v := ""
		if i+1 < len(kv) {
			v = kv[i+1]
		}
		dst = AppendHeaderField(dst, kv[i], v)
	}
	return append(dst, "\r\n"...)
}

// AppendHeaderField appends one "<key>: <value>" CRLF line of a header
// block.
func AppendHeaderField[K, V Text](dst []byte, key K, value V) []byte {
	dst = append(dst, key...)
	dst = append(dst, ": "...)
	dst = append(dst, value...)
	return append(dst, "\r\n"...)
}

// RangeHeaderLines calls fn with each field line of a header block (the
// status line and the final empty line excluded, line end removed), in
// order, until fn returns false or the empty line ends the block. It calls
// nothing when block does not start with "NATS/1.0". line is a sub-slice of
// block.
func RangeHeaderLines(block []byte, fn func(line []byte) bool) {
	if !hasPrefix(block, HeaderPrefix) {
		return
	}
	first := true
	for len(block) > 0 {
		i := 0
		for i < len(block) && block[i] != '\n' {
			i++
		}
		line := block[:i]
		if i < len(block) {
			block = block[i+1:]
		} else {
			block = nil
		}
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if first {
			first = false
			continue
		}
		if len(line) == 0 || !fn(line) {
			return
		}
	}
}

// CutHeaderLine splits a field line at its first ':' into key and value,
// spaces around each removed. ok is false when there is no ':' or nothing
// before it.
func CutHeaderLine(line []byte) (key, value []byte, ok bool) {
	for j := 0; j < len(line); j++ {
		if line[j] == ':' {
			key = trimSpace(line[:j])
			return key, trimSpace(line[j+1:]), len(key) > 0
		}
	}
	return nil, nil, false
}

// RangeHeader calls fn for each "<key>: <value>" line of a header block, in
// order, until fn returns false (RangeHeaderLines, CutHeaderLine).
// Malformed lines are skipped. k and v are sub-slices of block.
func RangeHeader(block []byte, fn func(k, v []byte) bool) {
	RangeHeaderLines(block, func(line []byte) bool {
		k, v, ok := CutHeaderLine(line)
		return !ok || fn(k, v)
	})
}

// HeaderValue returns the value of the first field named key (ASCII case
// ignored) of a header block. The result is a sub-slice of block. It does
// not allocate.
func HeaderValue(block []byte, key string) ([]byte, bool) {
	found, val := false, []byte(nil)
	RangeHeader(block, func(k, v []byte) bool {
		if EqualFold(k, key) {
			found, val = true, v
			return false
		}
		return true
	})
	return val, found
}

// EqualFold reports whether a and b are equal ignoring ASCII case (header
// names compare so).
func EqualFold[A, B Text](a A, b B) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x >= 'A' && x <= 'Z' {
			x += 'a' - 'A'
		}
		if y >= 'A' && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
