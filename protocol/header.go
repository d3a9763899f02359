package protocol

// This file implements SPEC.md "Headers": the NATS/1.0 header block of HPUB
// and HMSG, and the header names Fibril gives meaning to.

// Header names Fibril reads or writes.
const (
	// HeaderKey routes an HPUB to partition xxhash64(key) % partitions.
	HeaderKey = "Fibril-Key"
	// HeaderMsgID is a producer-chosen message id (kept for later de-dup).
	HeaderMsgID = "Fibril-Msg-Id"
	// HeaderReason says why a message was dead-lettered: max_deliveries or rejected.
	HeaderReason = "Fibril-Reason"
	// HeaderSubject is the original subject of a dead-lettered message.
	HeaderSubject = "Fibril-Subject"
	// HeaderPartition is the original partition of a dead-lettered message.
	HeaderPartition = "Fibril-Partition"
	// HeaderSeq is the original sequence number of a dead-lettered message.
	HeaderSeq = "Fibril-Seq"
	// HeaderDeliveries is how many times a dead-lettered message was delivered.
	HeaderDeliveries = "Fibril-Deliveries"
)

// AppendHeader appends a complete header block: "NATS/1.0", one
// "<key>: <value>" line per pair of kv, and the empty line. kv holds keys
// and values alternately; a trailing key without value gets an empty value.
// Keys must not hold ':' or whitespace and values no line ends.
func AppendHeader(dst []byte, kv ...string) []byte {
	dst = append(dst, headerPrefix+crlf...)
	for i := 0; i < len(kv); i += 2 {
		dst = append(dst, kv[i]...)
		dst = append(dst, ": "...)
		if i+1 < len(kv) {
			dst = append(dst, kv[i+1]...)
		}
		dst = append(dst, crlf...)
	}
	return append(dst, crlf...)
}

// HeaderValue returns the value of the first field named key (ASCII case
// ignored) in a header block, with surrounding spaces removed. The result is
// a sub-slice of block. It does not allocate.
func HeaderValue(block []byte, key string) ([]byte, bool) {
	found, val := false, []byte(nil)
	RangeHeader(block, func(k, v []byte) bool {
		if equalFoldASCII(k, key) {
			found, val = true, v
			return false
		}
		return true
	})
	return val, found
}

// RangeHeader calls fn for each "<key>: <value>" line of a header block, in
// order, until fn returns false. The status line and malformed lines are
// skipped. k and v are sub-slices of block.
func RangeHeader(block []byte, fn func(k, v []byte) bool) {
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
		colon := -1
		for j, c := range line {
			if c == ':' {
				colon = j
				break
			}
		}
		if colon <= 0 {
			continue
		}
		if !fn(trimSpace(line[:colon]), trimSpace(line[colon+1:])) {
			return
		}
	}
}

func equalFoldASCII(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		x, y := b[i], s[i]
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
