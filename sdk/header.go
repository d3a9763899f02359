package fibril

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fibrilmq/fibril/protocol"
)

// Header is a message's header block (SPEC.md section 12). Keys are kept as
// written; Get and Values fall back to an ASCII case-insensitive match.
type Header map[string][]string

// Reserved header keys (SPEC.md section 12).
const (
	HeaderKey        = protocol.HeaderKey        // partition key: xxhash64(key) % partitions
	HeaderMsgID      = protocol.HeaderMsgID      // message id, for de-duplication
	HeaderTTL        = protocol.HeaderTTL        // the message's TTL (WithTTL)
	HeaderDelay      = protocol.HeaderDelay      // hold it back after it is stored (WithDelay)
	HeaderDeliverAt  = protocol.HeaderDeliverAt  // hold it back until a time (WithDeliverAt)
	HeaderReason     = protocol.HeaderReason     // dead letters: max_deliveries | rejected | expired
	HeaderSubject    = protocol.HeaderSubject    // dead letters: original subject
	HeaderPartition  = protocol.HeaderPartition  // dead letters: original partition
	HeaderSeq        = protocol.HeaderSeq        // dead letters: original sequence
	HeaderDeliveries = protocol.HeaderDeliveries // dead letters: delivery count
)

// Get returns the first value for key, or "".
func (h Header) Get(key string) string {
	if v := h.Values(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// Values returns all values for key (exact match first, then case-insensitive).
func (h Header) Values(key string) []string {
	if v, ok := h[key]; ok {
		return v
	}
	for k, v := range h {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return nil
}

// Set replaces the values of key.
func (h Header) Set(key, value string) { h[key] = []string{value} }

// Add appends a value to key.
func (h Header) Add(key, value string) { h[key] = append(h[key], value) }

// encodeHeader encodes h as a NATS/1.0 block. Keys are written in sorted
// order so the encoding (and its CRC) is deterministic.
func encodeHeader(h Header) ([]byte, error) {
	kv := make([]string, 0, 2*len(h))
	for _, k := range slices.Sorted(maps.Keys(h)) {
		if k == "" || strings.ContainsAny(k, ": \t\r\n") {
			return nil, fmt.Errorf("%w: header key %q", ErrInvalidArgument, k)
		}
		for _, v := range h[k] {
			if strings.ContainsAny(v, "\r\n") {
				return nil, fmt.Errorf("%w: header value for %q contains CR or LF", ErrInvalidArgument, k)
			}
			kv = append(kv, k, v)
		}
	}
	return protocol.AppendHeader(nil, kv...), nil
}

// parseHeader decodes a header block the parser already validated.
func parseHeader(block []byte) Header {
	h := Header{}
	protocol.RangeHeader(block, func(k, v []byte) bool {
		key := string(k)
		h[key] = append(h[key], string(v))
		return true
	})
	return h
}
