package broker

import (
	"fmt"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
)

// Seq is a message's sequence number within one partition: the offset of the
// message in the partition's log. The first message gets 1; 0 means "none".
type Seq = seglog.Seq

// Partition is a partition index within a topic, from 0 to Partitions-1.
type Partition uint32

// TopicName names a topic. It is a subject without wildcards.
type TopicName string

// GroupName names a consumer group within a topic.
type GroupName string

// TopicID is the server-assigned number of a topic; ids are never reused, even
// after the topic is deleted.
type TopicID uint32

// GroupID is the server-assigned number of a consumer group; ids are unique
// across all topics and never reused.
type GroupID uint32

// OwnerID identifies who holds leases (the server uses one per connection); 0
// means "nobody in particular" and is never released by ReleaseOwner.
type OwnerID uint64

// Principal names the identity a lease is bound to (SetPrincipal): a
// settle that names another principal (SettleOp.As) is refused with
// ErrNotHolder. 0 is "none": leases of an owner without a principal, and
// settles without one (the embedding application's own), are not checked.
type Principal uint16

// Position is where a published message was stored.
type Position struct {
	Partition Partition
	Seq       Seq
	// Duplicate: the publish carried a message id (wire.HeaderMsgID) that
	// the partition stored within the topic's duplicate window; it was
	// not stored again, and Partition and Seq are the original's.
	Duplicate bool
}

// String formats a position as "<partition>:<seq>", as the confirm line does.
func (p Position) String() string { return fmt.Sprintf("%d:%d", p.Partition, p.Seq) }

// Handle identifies one delivery of one message to one group: the ack handle.
// It is valid while Attempt equals the message's current delivery count.
type Handle struct {
	Topic     TopicID
	Group     GroupID
	Partition Partition
	Seq       Seq
	Attempt   uint32
}

// String formats the handle as the reply subject the server puts on a delivery:
// "$F.<topic>.<group>.<partition>.<seq>.<attempt>".
func (h Handle) String() string { return h.toWire().String() }

// Message is one message to publish.
type Message struct {
	// Subject the message was published to. Stored and delivered with it.
	Subject string
	// Key, when non-empty, picks the partition: xxhash64(Key) % Partitions.
	// Without a key partitions are used round robin. It is not stored: a
	// group ordered by key reads the Fibril-Key header (wire.HeaderKey).
	Key []byte
	// Header is the raw NATS/1.0 header block (including its final CRLF CRLF),
	// or nil.
	Header []byte
	// Data is the payload.
	Data []byte
	// CRC, when non-zero, is the CRC-32 (IEEE) of Header followed by Data as
	// the producer computed it; a mismatch fails the publish with
	// ErrCRCMismatch. Zero means "not given".
	CRC uint32

	// ExpectLastMsgID, when not empty, makes the publish conditional: it
	// is stored only if the last message stored in its partition carried
	// this message id (JetStream's Nats-Expected-Last-Msg-Id), else it
	// fails with a *LastMsgIDError. It needs the topic's duplicate window
	// on (ErrInvalid otherwise); a duplicate is answered as one first.
	ExpectLastMsgID string
	// Expect, when not nil, holds more conditions on the partition the
	// publish is routed to (expect.go); it is copied.
	Expect *Expect

	noDedup bool // a requeue: stored whatever its message id (dedup.go)

	// Received, when non-zero, marks a sampled publish for the stage
	// accounting (Options.Stages): when it was received, as
	// stagetime.Now. Zero: not sampled.
	Received int64
}

// Delivery is one message handed to a consumer of a group.
//
// For callbacks of the async API (PollAsync, Subscribe) Subject, Header and
// Data are borrowed until the callback returns; the sync Poll returns copies.
type Delivery struct {
	Handle  Handle
	Subject string
	Header  []byte
	Data    []byte
	// CRC is the CRC-32 (IEEE) of Header followed by Data, as stored.
	CRC uint32
	// Attempt is the delivery count, starting at 1 (same as Handle.Attempt).
	Attempt uint32
	// Time is when the message was stored.
	Time time.Time

	b *Broker
}

// SettleKind says what a settle operation does with a delivery.
type SettleKind uint8

const (
	// SettleAck marks the message done for the group (final, idempotent).
	SettleAck SettleKind = iota + 1
	// SettleNack puts the message back to ready, after SettleOp.Delay.
	SettleNack
	// SettleReject dead-letters the message at once (reason "rejected").
	SettleReject
	// SettleExtend pushes the lease deadline to now + SettleOp.Delay (the
	// group's lease duration when zero).
	SettleExtend
)

// SettleOp is one settle operation for Broker.Settle.
type SettleOp struct {
	Kind SettleKind
	// Delay is the redelivery delay for SettleNack and the new lease length
	// for SettleExtend.
	Delay time.Duration
	// Principal, when not 0, is who settles: a delivery made to another
	// principal is refused with ErrNotHolder (see As).
	Principal Principal
}

// As returns op settled by principal p: only deliveries made to p (or to
// an owner without a principal) accept it.
func (op SettleOp) As(p Principal) SettleOp {
	op.Principal = p
	return op
}

// Ack is the SettleOp that acknowledges a delivery.
func Ack() SettleOp { return SettleOp{Kind: SettleAck} }

// Nack is the SettleOp that requeues a delivery after delay.
func Nack(delay time.Duration) SettleOp { return SettleOp{Kind: SettleNack, Delay: delay} }

// Reject is the SettleOp that dead-letters a delivery.
func Reject() SettleOp { return SettleOp{Kind: SettleReject} }

// Extend is the SettleOp that extends a delivery's lease by d (the group's
// lease duration when d is zero).
func Extend(d time.Duration) SettleOp { return SettleOp{Kind: SettleExtend, Delay: d} }
