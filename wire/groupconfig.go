package wire

// This file holds the one schema of a consumer group's configuration
// (SPEC.md 10.2): the JSON of GROUP CREATE and of the "config" of GROUP
// INFO, the SDK's GroupConfig, and the engine's (broker.GroupConfig is
// this struct with the engine's defaults and checks as methods). It is
// here, not in the broker, because the SDK and protocol must not import
// the engine.

// Start says where a new group begins.
type Start string

// Start values.
const (
	// StartEarliest: the group sees every retained message (default).
	StartEarliest Start = "earliest"
	// StartNew: the group sees messages published after it was created.
	StartNew Start = "new"
	// StartSeq: the group begins at offset StartSeq of every partition (or
	// at the oldest retained message, if later).
	StartSeq Start = "seq"
	// StartTime: the group begins, in every partition, at the first
	// retained message stored at or after StartTime.
	StartTime Start = "time"
)

// MaxBackoff is the most entries GroupConfig.BackoffMs may have.
const MaxBackoff = 32

// MaxFilters is the most entries GroupConfig.Filter may have.
const MaxFilters = 64

// NATSAck says how a server settles deliveries to connections that cannot
// settle (stock NATS clients, SPEC.md 10.2).
type NATSAck string

// NATSAck values.
const (
	// NATSAckAuto: settled when written (at most once; default).
	NATSAckAuto NATSAck = "auto"
	// NATSAckExplicit: leased until the client settles by publishing +ACK
	// to the handle (at least once).
	NATSAckExplicit NATSAck = "explicit"
)

// Ordering says whether a group hands out its messages one at a time.
type Ordering string

// Ordering values.
const (
	// OrderNone: deliveries run in parallel, up to what consumers ask
	// (default; stored as "").
	OrderNone Ordering = "none"
	// OrderPartition: in each partition at most one message of the group
	// is out at a time (leased, waiting out a NACK delay or being
	// dead-lettered), and it is the lowest unsettled offset: messages are
	// processed in offset order, one after another, and the next is
	// handed out only once the one before it is settled.
	OrderPartition Ordering = "partition"
	// OrderKey: in each partition at most one message per Fibril-Key is
	// out at a time, and it is the lowest unsettled offset of that key:
	// each key is processed in offset order while different keys run in
	// parallel. A message without a key is its own key (unordered against
	// the others).
	OrderKey Ordering = "key"
)

// Expiry says what a group does with a message whose TTL ran out before
// the group delivered it.
type Expiry string

// Expiry values.
const (
	// ExpiryDrop: the message is settled for the group without delivery
	// (default; stored as "").
	ExpiryDrop Expiry = "drop"
	// ExpiryDeadLetter: the message goes to the group's dead-letter topic
	// with Fibril-Reason: expired.
	ExpiryDeadLetter Expiry = "dead_letter"
)

// GroupConfig configures a consumer group (SPEC.md 10.2). JSON names are
// those of GROUP CREATE; a zero field takes its default.
type GroupConfig struct {
	Start Start `json:"start,omitempty"` // default earliest
	// StartSeq is the offset where a group with Start "seq" begins in each
	// partition: 1 or more, at most a partition's next offset. Only with
	// Start "seq".
	StartSeq int64 `json:"start_seq,omitempty"`
	// StartTime is the RFC 3339 time where a group with Start "time"
	// begins. Only with Start "time".
	StartTime string `json:"start_time,omitempty"`
	LeaseMs   int64  `json:"lease_ms,omitempty"` // default 30000, at most 4294967295
	// BackoffMs are the redelivery delays after a NACK without a delay or
	// an expired lease: after delivery n the message waits
	// BackoffMs[min(n, len)-1] ms before it is ready again. Default none
	// (ready at once); at most MaxBackoff entries, each 1..4294967295.
	BackoffMs []int64 `json:"backoff_ms,omitempty"`
	// Filter are subject filters (wildcards allowed): the group receives
	// only the messages of its topic whose subject matches one; the others
	// are settled for it without delivery. Default none (every message);
	// at most MaxFilters entries.
	Filter []string `json:"filter,omitempty"`
	// MaxDeliveries is how many times a message is delivered before it is
	// dead-lettered; default 5, -1 means unlimited.
	MaxDeliveries int `json:"max_deliveries,omitempty"`
	// DeadLetter is the dead-letter topic; default "$DLQ.<topic>.<group>",
	// "-" means none (a message that reaches MaxDeliveries is then dropped).
	DeadLetter string `json:"dead_letter,omitempty"`
	// Ordered is the group's ordering (OrderNone, the default,
	// OrderPartition or OrderKey). "none" is stored as "".
	Ordered Ordering `json:"ordered,omitempty"`
	// OnExpiry is what the group does with a message whose TTL ran out
	// (TopicConfig.MessageTTLMs, the Nats-TTL header) before it was
	// handed out: ExpiryDrop (the default; "drop" is stored as "") or
	// ExpiryDeadLetter.
	OnExpiry Expiry `json:"on_expiry,omitempty"`
	// NATSAck says how deliveries to NATS-mode connections are settled
	// (default auto). The engine only stores it. An empty value (catalogs
	// written before the field) means auto.
	NATSAck NATSAck `json:"nats_ack,omitempty"`
}
