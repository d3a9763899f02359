package wire

// This file holds the one schema of a topic's configuration (SPEC.md
// 10.1): the JSON of TOPIC CREATE and of the "config" of TOPIC INFO, the
// SDK's TopicConfig, and the engine's (broker.TopicConfig is this struct
// with the engine's defaults and checks as methods). It is here, not in
// the broker, because the SDK and protocol must not import the engine.

// Durability says when a publish is confirmed.
type Durability string

// Durability values.
const (
	// DurabilityGroup: confirmed once on disk; concurrent publishes share an
	// fsync (default).
	DurabilityGroup Durability = "group"
	// DurabilitySync: every batch is fsynced before it is confirmed.
	DurabilitySync Durability = "sync"
	// DurabilityNone: confirmed once written; the OS flushes later.
	DurabilityNone Durability = "none"
)

// Retention says when messages are deleted.
type Retention string

// Retention values.
const (
	// RetentionWorkqueue: a message is deleted once every group has settled
	// it; kept until the first group exists (default).
	RetentionWorkqueue Retention = "workqueue"
	// RetentionLimits: messages are deleted by age, size and count only.
	RetentionLimits Retention = "limits"
)

// FullPolicy says what a publish does when the topic is full.
type FullPolicy string

// FullPolicy values.
const (
	// FullBlock: a sync publish waits for room, at most the topic's
	// BlockTimeoutMs (and its context), then fails with topic_full; an
	// async publish fails with topic_full at once (default).
	FullBlock FullPolicy = "block"
	// FullReject: every publish fails at once with topic_full.
	FullReject FullPolicy = "reject"
)

// Compression says how a topic's sealed data segments are stored.
type Compression string

// Compression values (costs in BENCHMARKS.md, "Compression of sealed
// segments").
const (
	// CompressionNone keeps segments plain: zero-copy reads (default).
	CompressionNone Compression = "none"
	// CompressionS2 compresses sealed segments with s2: fast, about 3x on
	// JSON-like payloads; the first read from a segment decompresses all
	// of it.
	CompressionS2 Compression = "s2"
	// CompressionZstd compresses sealed segments with zstd: about 6x on
	// JSON-like payloads, slower to decode.
	CompressionZstd Compression = "zstd"
)

// TopicConfig configures a topic (SPEC.md 10.1). JSON names are those of
// TOPIC CREATE; a zero field takes its default.
type TopicConfig struct {
	// Subjects are the filters (wildcards allowed) whose publishes the topic
	// captures; default: the topic name alone.
	Subjects   []string `json:"subjects,omitempty"`
	Partitions int      `json:"partitions,omitempty"` // default 1
	// Replicas is how many nodes hold each partition: 0 (left out)
	// means every node of a cluster (3 or 5), 1 on a single node;
	// given, 1 up to the node count (SPEC.md 10.1).
	Replicas   int        `json:"replicas,omitempty"`
	Durability Durability `json:"durability,omitempty"` // default group
	Retention  Retention  `json:"retention,omitempty"`  // default workqueue
	MaxAgeMs   int64      `json:"max_age_ms,omitempty"` // 0: unlimited
	MaxBytes   int64      `json:"max_bytes,omitempty"`  // 0: unlimited
	MaxMsgs    int64      `json:"max_msgs,omitempty"`   // 0: unlimited
	// MaxUnsettledMsgs and MaxUnsettledBytes bound what is stored but not
	// yet settled by every group (0: unlimited). They are never passed: a
	// publish takes its place under them when it is enqueued (concurrent
	// publishers and batches included), and a message bigger than
	// MaxUnsettledBytes is never accepted.
	MaxUnsettledMsgs  int64      `json:"max_unsettled_msgs,omitempty"`
	MaxUnsettledBytes int64      `json:"max_unsettled_bytes,omitempty"`
	FullPolicy        FullPolicy `json:"full_policy,omitempty"` // default block
	// BlockTimeoutMs bounds how long a publish waits for room under
	// FullBlock before it fails with topic_full; default 5000, at most
	// 4294967295.
	BlockTimeoutMs int64 `json:"block_timeout_ms,omitempty"`
	// Compression is the codec the topic's data logs compress sealed
	// segments with (default none; event logs are never compressed). It is
	// fixed when the topic is created: there is no topic update, and a
	// TOPIC CREATE with another value is a different configuration.
	Compression Compression `json:"compression,omitempty"`
	// MessageTTLMs is how long a message stays deliverable when its
	// publish carries no Nats-TTL header (0: forever). A group hands a
	// message out only before its deadline (stored time + TTL); past it
	// the group drops it or dead-letters it (GroupConfig.OnExpiry). It
	// does not remove the message from the log (max_age_ms does). At most
	// MaxTTLMs.
	MessageTTLMs int64 `json:"message_ttl_ms,omitempty"`
	// AllowMsgTTL lets publishes set their own TTL with the Nats-TTL
	// header (as JetStream's allow_msg_ttl); without it such a publish is
	// refused with invalid_header.
	AllowMsgTTL bool `json:"allow_msg_ttl,omitempty"`
	// AllowMsgDelay lets publishes hold a message back from every group
	// for a while (header Fibril-Delay) or until a time (Fibril-Deliver-At);
	// without it such a publish is refused with invalid_header.
	AllowMsgDelay bool `json:"allow_msg_delay,omitempty"`
	// DuplicateWindowMs is how long a publish's message id (header
	// Nats-Msg-Id) is remembered in its partition: a publish with an id
	// seen within the window is not stored again but confirmed with the
	// original's position, marked duplicate. nil takes the default
	// (DefaultDuplicateWindowMs, JetStream's 2 minutes); 0 turns
	// de-duplication off; at most 4294967295. A pointer because 0 is a
	// value here, not "the default".
	DuplicateWindowMs *int64 `json:"duplicate_window_ms,omitempty"`
	// DuplicateMaxIDs bounds the ids a partition remembers (default
	// DefaultDuplicateMaxIDs, at most MaxDuplicateMaxIDs). At the bound the
	// oldest id is forgotten before its window ends: a later publish with
	// it is stored as new.
	DuplicateMaxIDs int64 `json:"duplicate_max_ids,omitempty"`
}

// MaxTTLMs is the longest message TTL, in ms (about 100 years).
const MaxTTLMs = 100 * 365 * 24 * 3600 * 1000

// De-duplication defaults and bounds (SPEC.md 10.1).
const (
	DefaultDuplicateWindowMs = 120000
	DefaultDuplicateMaxIDs   = 100000
	MaxDuplicateMaxIDs       = 10000000
	// MaxMsgIDLen is the longest message id; a longer one is refused.
	MaxMsgIDLen = 256
)
