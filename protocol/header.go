package protocol

import "github.com/fibrilmq/fibril/wire"

// This file implements SPEC.md "Headers": the NATS/1.0 header block of HPUB
// and HMSG, and the header names Fibril gives meaning to. The format is
// package wire's, shared with the broker.

// Header names Fibril reads or writes (SPEC.md 12).
const (
	// HeaderKey routes an HPUB to partition xxhash64(key) % partitions.
	HeaderKey = wire.HeaderKey
	// HeaderMsgID is a producer-chosen message id: a topic stores a
	// message once per id within its duplicate window (SPEC.md 10.1).
	HeaderMsgID = wire.HeaderMsgID
	// HeaderTTL sets one message's TTL (SPEC.md 12, on a topic with allow_msg_ttl).
	HeaderTTL = wire.HeaderTTL
	// HeaderDelay holds a message back after it is stored (on a topic with allow_msg_delay).
	HeaderDelay = wire.HeaderDelay
	// HeaderDeliverAt holds a message back until a time (on a topic with allow_msg_delay).
	HeaderDeliverAt = wire.HeaderDeliverAt
	// HeaderReason says why a message was dead-lettered: max_deliveries, rejected or expired.
	HeaderReason = wire.HeaderReason
	// HeaderSubject is the original subject of a dead-lettered message.
	HeaderSubject = wire.HeaderSubject
	// HeaderPartition is the original partition of a dead-lettered message.
	HeaderPartition = wire.HeaderPartition
	// HeaderSeq is the original sequence number of a dead-lettered message.
	HeaderSeq = wire.HeaderSeq
	// HeaderDeliveries is how many times a dead-lettered message was delivered.
	HeaderDeliveries = wire.HeaderDeliveries
)

// AppendHeader appends a complete header block: "NATS/1.0", one
// "<key>: <value>" line per pair of kv, and the empty line. kv holds keys
// and values alternately; a trailing key without value gets an empty value.
// Keys must not hold ':' or whitespace and values no line ends.
func AppendHeader(dst []byte, kv ...string) []byte { return wire.AppendHeader(dst, kv...) }

// HeaderValue returns the value of the first field named key (ASCII case
// ignored) in a header block, with surrounding spaces removed. The result is
// a sub-slice of block. It does not allocate.
func HeaderValue(block []byte, key string) ([]byte, bool) { return wire.HeaderValue(block, key) }

// RangeHeader calls fn for each "<key>: <value>" line of a header block, in
// order, until fn returns false. The status line and malformed lines are
// skipped; a block that does not start with "NATS/1.0" has no lines. k and v
// are sub-slices of block.
func RangeHeader(block []byte, fn func(k, v []byte) bool) { wire.RangeHeader(block, fn) }
