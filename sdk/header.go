package fibril

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Header is a message's header block (NATS/1.0 style). Keys are kept as
// written; Get falls back to a case-insensitive match.
type Header map[string][]string

// Reserved header keys.
const (
	HeaderKey        = "Fibril-Key"        // partition key: xxhash64(key) % partitions
	HeaderMsgID      = "Fibril-Msg-Id"     // message id, for de-duplication
	HeaderReason     = "Fibril-Reason"     // dead letters: max_deliveries | rejected
	HeaderSubject    = "Fibril-Subject"    // dead letters: original subject
	HeaderPartition  = "Fibril-Partition"  // dead letters: original partition
	HeaderSeq        = "Fibril-Seq"        // dead letters: original sequence
	HeaderDeliveries = "Fibril-Deliveries" // dead letters: delivery count
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

// validHeaderToken reports whether s can be written in a header line.
func validHeaderToken(s string, isKey bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' || (isKey && (c == ':' || c == ' ' || c == '\t')) {
			return false
		}
	}
	return !isKey || s != ""
}

// appendHeader encodes h as a NATS/1.0 block ending in an empty line. Keys are
// written in sorted order so the encoding (and its CRC) is deterministic.
func appendHeader(b []byte, h Header) ([]byte, error) {
	b = append(b, "NATS/1.0\r\n"...)
	for _, k := range sortedKeys(h) {
		if !validHeaderToken(k, true) {
			return nil, fmt.Errorf("%w: header key %q", ErrInvalidArgument, k)
		}
		for _, v := range h[k] {
			if !validHeaderToken(v, false) {
				return nil, fmt.Errorf("%w: header value for %q contains CR or LF", ErrInvalidArgument, k)
			}
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	return append(b, "\r\n"...), nil
}

// parseHeader decodes a NATS/1.0 block. An inline status ("NATS/1.0 503")
// is ignored; lines without a colon are an error.
func parseHeader(block []byte) (Header, error) {
	line, rest, ok := bytes.Cut(block, []byte("\r\n"))
	if !ok || !bytes.HasPrefix(line, []byte("NATS/1.0")) {
		return nil, fmt.Errorf("%w: header block does not start with NATS/1.0", ErrProtocol)
	}
	h := Header{}
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		if len(line) == 0 {
			continue
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return nil, fmt.Errorf("%w: header line %q has no colon", ErrProtocol, line)
		}
		key := string(bytes.TrimSpace(k))
		h[key] = append(h[key], string(bytes.TrimSpace(v)))
	}
	return h, nil
}

func sortedKeys(h Header) []string { return slices.Sorted(maps.Keys(h)) }
