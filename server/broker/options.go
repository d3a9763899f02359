package broker

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
	"github.com/fibrilmq/fibril/server/stagetime"
	"github.com/fibrilmq/fibril/wire"
)

// StoreOpener opens (creating if needed) the log kept in dir with the given
// durability policy. The broker opens two per partition: "data" for messages
// and "events" for consumer-state events.
//
// The store must keep seglog.Store's contract, and the policy decides who
// fsyncs: under seglog.PolicyCaller (durability group and sync) the broker
// alone does, through Sync, and confirms nothing a Sync has not covered;
// under PolicyNone (durability none) nobody waits. What the broker uses
// beyond records is part of that contract too, checked once at open: a
// data log whose SideRecords is true carries the side copies of events
// (sidecopy.go; otherwise each commit also waits for the event log's
// fsync), and a compressed topic's data log is told through
// ReleaseSwapped when the old maps it holds (SwapCount) are no longer
// borrowed. A store that embeds the file log keeps both.
type StoreOpener func(dir string, policy seglog.Policy) (seglog.Store, error)

// Options configures a Broker. The zero value of a field means its default.
type Options struct {
	// OpenStore opens a partition's logs. Default (nil): the file-backed
	// seglog with SegmentSize (dead-letter topics: at most 4 MiB) and
	// EventSegmentSize.
	OpenStore StoreOpener
	// OpenPartition, when set, opens both logs of each partition (set
	// it or OpenStore, not both), and says whether they are replicated
	// (role.go): a replicated partition serves only on the node its
	// Replica names.
	OpenPartition PartitionOpener
	// Replicas is how many nodes the cluster has (default 1): a topic's
	// replicas may be 1..Replicas, and one that leaves it out is on
	// every node (placement.go).
	Replicas int
	// Node is this broker's node name in a cluster: a partition whose
	// placement does not name it is held elsewhere (placement.go).
	Node string
	// Place, when set, picks the nodes holding each partition of a topic
	// created through Catalog (placement.go); its answer goes into the
	// catalog change, so every broker records the same placement.
	Place Placer
	// Catalog, when set, orders every catalog change (topic and group
	// creates, deletes, pauses) with other brokers' (catrepl.go): the
	// change is proposed to it and made by ApplyCatalog on each broker.
	Catalog CatalogLog
	// SegmentSize is the segment size of the default data logs. Default
	// seglog.DefaultSegmentSize (64 MiB); each segment is preallocated.
	SegmentSize int64
	// EventSegmentSize is the segment size of the default event logs.
	// Default 4 MiB.
	EventSegmentSize int64
	// Clock supplies time to leases, delays and retention. Default: the
	// system clock.
	Clock Clock
	// QueueSize is the capacity of each partition's command ring (rounded up
	// to a power of two). Default 8192.
	QueueSize int
	// MaxBatch caps how many commands an actor takes per round. Default 1024.
	MaxBatch int
	// SnapshotEvery writes a partition's consumer-state snapshot after this
	// many events, so replay on open stays short. Default 100000.
	SnapshotEvery int
	// RetentionInterval is how often an idle partition applies retention.
	// Default 1s.
	RetentionInterval time.Duration
	// Logf reports background errors (snapshot, retention, unreadable
	// records). Default: the standard logger.
	Logf func(format string, args ...any)
	// Observer, when set, receives fsync latencies and group-commit batch
	// sizes (see Observer). Broker.Stats keeps totals either way.
	Observer Observer
	// Stages, when set, records the engine's stages of sampled publishes
	// (Message.Received): the ring enqueue, the actor's pick-up, the
	// append, the fsync that made them durable, the completion
	// (server/stagetime).
	Stages *stagetime.Recorder
	// ScrubRate is how many bytes a second the background scrub reads to
	// check every stored record again, sealed segments from disk (scrub.go).
	// Default 32 MiB/s; negative: no scrub.
	ScrubRate int64
	// ScrubEvery is the pause between two passes of the scrub over every
	// log. Default 1h.
	ScrubEvery time.Duration
	// QuickStart makes Open check only the segments no earlier Open
	// checked (seglog.Options.QuickVerify) instead of every stored record,
	// and starts the scrub's first pass at once: restarts read only what
	// is new, and damage done while the broker was stopped to what was
	// checked before is found by the scrub (or stops the group that meets
	// it) instead of refusing the start.
	QuickStart bool

	// MaxOpenPartitions bounds the partitions whose logs are open at once
	// (four descriptors each): past it, the least recently used idle
	// partitions close their logs and reopen them at their next command
	// (idle.go). 0: half the soft RLIMIT_NOFILE divided by four, at least
	// 64.
	MaxOpenPartitions int

	// noSideCopies turns off the side copies of events in the data log
	// (sidecopy.go): every commit then waits for the event log's fsync
	// too. For tests and measurements.
	noSideCopies bool
	// eventSyncEvery overrides evSyncEvery (sidecopy.go), for tests.
	eventSyncEvery time.Duration
}

// DefaultOptions returns the options with every default filled in (except
// OpenStore, which stays nil and means the file-backed seglog, and Logf).
func DefaultOptions() Options {
	return Options{
		Clock:             SystemClock(),
		QueueSize:         8192,
		MaxBatch:          1024,
		SnapshotEvery:     100000,
		RetentionInterval: time.Second,
		SegmentSize:       seglog.DefaultSegmentSize,
		EventSegmentSize:  4 << 20,
	}
}

// withDefaults returns a copy with defaults applied; the caller's value is
// never changed.
func (o Options) withDefaults() (Options, error) {
	d := DefaultOptions()
	if o.Clock == nil {
		o.Clock = d.Clock
	}
	if o.QueueSize == 0 {
		o.QueueSize = d.QueueSize
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = d.MaxBatch
	}
	if o.SnapshotEvery == 0 {
		o.SnapshotEvery = d.SnapshotEvery
	}
	if o.RetentionInterval == 0 {
		o.RetentionInterval = d.RetentionInterval
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = seglog.DefaultSegmentSize
	}
	if o.EventSegmentSize == 0 {
		o.EventSegmentSize = 4 << 20
	}
	if o.ScrubRate == 0 {
		o.ScrubRate = 32 << 20
	}
	if o.ScrubEvery == 0 {
		o.ScrubEvery = time.Hour
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.MaxOpenPartitions == 0 {
		o.MaxOpenPartitions = defaultMaxOpenPartitions()
	}
	switch {
	case o.QueueSize < 2 || o.QueueSize > 1<<24:
		return o, fmt.Errorf("%w: QueueSize %d out of [2, 16M]", ErrInvalid, o.QueueSize)
	case o.MaxBatch < 1:
		return o, fmt.Errorf("%w: MaxBatch %d < 1", ErrInvalid, o.MaxBatch)
	case o.SnapshotEvery < 1:
		return o, fmt.Errorf("%w: SnapshotEvery %d < 1", ErrInvalid, o.SnapshotEvery)
	case o.MaxOpenPartitions < 1:
		return o, fmt.Errorf("%w: MaxOpenPartitions %d < 1", ErrInvalid, o.MaxOpenPartitions)
	case o.OpenStore != nil && o.OpenPartition != nil:
		return o, fmt.Errorf("%w: both OpenStore and OpenPartition are set", ErrInvalid)
	case o.ScrubEvery < 0:
		return o, fmt.Errorf("%w: negative ScrubEvery", ErrInvalid)
	case o.RetentionInterval < 0:
		return o, fmt.Errorf("%w: negative RetentionInterval", ErrInvalid)
	case o.SegmentSize < seglog.MinSegmentSize || o.SegmentSize > seglog.MaxSegmentSize:
		return o, fmt.Errorf("%w: SegmentSize %d out of [%d, %d]", ErrInvalid,
			o.SegmentSize, seglog.MinSegmentSize, seglog.MaxSegmentSize)
	case o.EventSegmentSize < seglog.MinSegmentSize || o.EventSegmentSize > seglog.MaxSegmentSize:
		return o, fmt.Errorf("%w: EventSegmentSize %d out of [%d, %d]", ErrInvalid,
			o.EventSegmentSize, seglog.MinSegmentSize, seglog.MaxSegmentSize)
	}
	return o, nil
}

// Durability says when a publish is confirmed (wire.Durability).
type Durability = wire.Durability

// Durability values.
const (
	DurabilityGroup = wire.DurabilityGroup // confirmed once on disk; a shared fsync (default)
	DurabilitySync  = wire.DurabilitySync  // every batch fsynced before it is confirmed
	DurabilityNone  = wire.DurabilityNone  // confirmed once written; the OS flushes later
)

// Retention says when messages are deleted (wire.Retention).
type Retention = wire.Retention

// Retention values.
const (
	RetentionWorkqueue = wire.RetentionWorkqueue // deleted once every group settled it (default)
	RetentionLimits    = wire.RetentionLimits    // deleted by age, size and count only
)

// FullPolicy says what a publish does when the topic is full
// (wire.FullPolicy).
type FullPolicy = wire.FullPolicy

// FullPolicy values.
const (
	// FullBlock: a sync publish waits for room, at most the topic's
	// BlockTimeoutMs (and its context), then fails with ErrTopicFull; an
	// async publish fails with ErrTopicFull at once (default).
	FullBlock = wire.FullBlock
	// FullReject: every publish fails at once with ErrTopicFull.
	FullReject = wire.FullReject
)

// TopicConfig configures a topic: the one schema wire.TopicConfig (the
// JSON of TOPIC CREATE, the SDK's TopicConfig), with the engine's defaults
// and checks as methods; convert with TopicConfig(w) and
// wire.TopicConfig(c), no field is copied by hand. Compression is ignored
// when Options.OpenStore is set (the opener decides how its stores keep
// data).
type TopicConfig wire.TopicConfig

// Compression says how a topic's sealed data segments are stored
// (wire.Compression; server/seglog Options.Compression).
type Compression = wire.Compression

// Compression values.
const (
	CompressionNone = wire.CompressionNone // plain segments: zero-copy reads (default)
	CompressionS2   = wire.CompressionS2   // s2: fast, about 3x on JSON-like data
	CompressionZstd = wire.CompressionZstd // zstd: about 6x, slower to decode
)

// seglogCompression maps c to the log's codec. Callers validated c; an
// empty value (a catalog written before the field) is none.
func seglogCompression(c Compression) seglog.Compression {
	switch c {
	case CompressionS2:
		return seglog.CompressionS2
	case CompressionZstd:
		return seglog.CompressionZstd
	}
	return seglog.CompressionNone
}

// DefaultBlockTimeoutMs is how long a publish to a full topic with
// FullBlock waits for room by default.
const DefaultBlockTimeoutMs = 5000

func (c TopicConfig) withDefaults(name TopicName) (TopicConfig, error) {
	if len(c.Subjects) == 0 {
		c.Subjects = []string{string(name)}
	} else {
		c.Subjects = append([]string(nil), c.Subjects...)
	}
	for _, s := range c.Subjects {
		if err := validFilter(s); err != nil {
			return c, err
		}
	}
	if c.Partitions == 0 {
		c.Partitions = 1
	}
	if c.Partitions < 1 || c.Partitions > 4096 {
		return c, fmt.Errorf("%w: partitions %d out of [1, 4096]", ErrInvalid, c.Partitions)
	}
	switch c.Durability {
	case "":
		c.Durability = DurabilityGroup
	case DurabilityGroup, DurabilitySync, DurabilityNone:
	default:
		return c, fmt.Errorf("%w: durability %q (want sync, group or none)", ErrInvalid, c.Durability)
	}
	switch c.Retention {
	case "":
		c.Retention = RetentionWorkqueue
	case RetentionWorkqueue, RetentionLimits:
	default:
		return c, fmt.Errorf("%w: retention %q (want workqueue or limits)", ErrInvalid, c.Retention)
	}
	switch c.FullPolicy {
	case "":
		c.FullPolicy = FullBlock
	case FullBlock, FullReject:
	default:
		return c, fmt.Errorf("%w: full_policy %q (want block or reject)", ErrInvalid, c.FullPolicy)
	}
	switch c.Compression {
	case "":
		c.Compression = CompressionNone
	case CompressionNone, CompressionS2, CompressionZstd:
	default:
		return c, fmt.Errorf("%w: compression %q (want none, s2 or zstd)", ErrInvalid, c.Compression)
	}
	if c.MaxAgeMs < 0 || c.MaxBytes < 0 || c.MaxMsgs < 0 || c.MaxUnsettledMsgs < 0 || c.MaxUnsettledBytes < 0 {
		return c, fmt.Errorf("%w: negative limit", ErrInvalid)
	}
	if c.MessageTTLMs < 0 || c.MessageTTLMs > wire.MaxTTLMs {
		return c, fmt.Errorf("%w: message_ttl_ms %d out of range [0, %d]", ErrInvalid, c.MessageTTLMs, int64(wire.MaxTTLMs))
	}
	if c.BlockTimeoutMs == 0 {
		c.BlockTimeoutMs = DefaultBlockTimeoutMs
	}
	if c.BlockTimeoutMs < 1 || c.BlockTimeoutMs > maxLeaseMs {
		return c, fmt.Errorf("%w: block_timeout_ms %d out of range [1, %d]", ErrInvalid, c.BlockTimeoutMs, maxLeaseMs)
	}
	return c, c.checkDuplicates() // dedup.go
}

// policy is the seglog policy a topic's logs are opened with. Under
// durability group and sync the partition owns fsync (syncer.go), so the
// logs are PolicyCaller: they fsync on their own only to seal a segment.
// Under none nobody waits for an fsync: PolicyNone flushes in the
// background.
func (c TopicConfig) policy() seglog.Policy {
	if c.Durability == DurabilityNone {
		return seglog.PolicyNone
	}
	return seglog.PolicyCaller
}

// Start says where a new group begins (wire.Start).
type Start = wire.Start

// Start values.
const (
	StartEarliest = wire.StartEarliest // the group sees every retained message (default)
	StartNew      = wire.StartNew      // the group sees messages published after it was created
	StartSeq      = wire.StartSeq      // the group begins at GroupConfig.StartSeq in every partition
	StartTime     = wire.StartTime     // the group begins at the first message stored at or after GroupConfig.StartTime
)

// GroupConfig configures a consumer group: the one schema wire.GroupConfig
// (the JSON of GROUP CREATE, the SDK's GroupConfig), with the engine's
// defaults and checks as methods; convert with GroupConfig(w) and
// wire.GroupConfig(c), no field is copied by hand. The engine only stores
// NATSAck: a server applies it to deliveries to clients that cannot settle.
type GroupConfig wire.GroupConfig

// NATSAck is GroupConfig.NATSAck (wire.NATSAck).
type NATSAck = wire.NATSAck

// NATSAck values.
const (
	NATSAckAuto     = wire.NATSAckAuto     // settled when written (at most once)
	NATSAckExplicit = wire.NATSAckExplicit // leased until the client settles (at least once)
)

// maxLeaseMs is the longest lease (SPEC.md 10.2: lease_ms 1..4294967295),
// and the longest block_timeout_ms.
const maxLeaseMs = 1<<32 - 1

func (c GroupConfig) withDefaults(topic TopicName, group GroupName) (GroupConfig, error) {
	if err := c.checkStart(); err != nil {
		return c, err
	}
	if c.Start == "" {
		c.Start = StartEarliest
	}
	if c.LeaseMs == 0 {
		c.LeaseMs = 30000
	}
	if c.LeaseMs < 1 || c.LeaseMs > maxLeaseMs {
		return c, fmt.Errorf("%w: lease_ms %d out of range [1, %d]", ErrInvalid, c.LeaseMs, maxLeaseMs)
	}
	if len(c.BackoffMs) > wire.MaxBackoff {
		return c, fmt.Errorf("%w: backoff_ms has %d entries, at most %d", ErrInvalid, len(c.BackoffMs), wire.MaxBackoff)
	}
	for i, ms := range c.BackoffMs {
		if ms < 1 || ms > maxLeaseMs {
			return c, fmt.Errorf("%w: backoff_ms[%d] %d out of range [1, %d]", ErrInvalid, i, ms, maxLeaseMs)
		}
	}
	if len(c.Filter) > wire.MaxFilters {
		return c, fmt.Errorf("%w: filter has %d entries, at most %d", ErrInvalid, len(c.Filter), wire.MaxFilters)
	}
	for i, f := range c.Filter {
		if !wire.ValidFilter(f) || wire.IsReserved(f) {
			return c, fmt.Errorf("%w: filter[%d] %q is not a subject filter", ErrInvalid, i, f)
		}
	}
	c.Filter = slices.Clip(slices.Clone(c.Filter))
	if len(c.Filter) == 0 {
		c.Filter = nil
	}
	c.BackoffMs = slices.Clip(slices.Clone(c.BackoffMs)) // never share the caller's array
	if len(c.BackoffMs) == 0 {
		c.BackoffMs = nil // [] and absent are one configuration
	}
	switch c.OnExpiry {
	case "", wire.ExpiryDrop:
		c.OnExpiry = "" // absent and "drop" are one configuration
	case wire.ExpiryDeadLetter:
	default:
		return c, fmt.Errorf("%w: on_expiry %q (drop or dead_letter)", ErrInvalid, c.OnExpiry)
	}
	switch c.Ordered {
	case "", wire.OrderNone:
		c.Ordered = "" // absent and "none" are one configuration
	case wire.OrderPartition, wire.OrderKey:
	default:
		return c, fmt.Errorf("%w: ordered %q (none, partition or key)", ErrInvalid, c.Ordered)
	}
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = 5
	}
	if c.MaxDeliveries < -1 {
		return c, fmt.Errorf("%w: max_deliveries %d", ErrInvalid, c.MaxDeliveries)
	}
	if c.DeadLetter == "" {
		c.DeadLetter = DeadLetterTopic(topic, group)
	}
	switch c.NATSAck {
	case "":
		c.NATSAck = NATSAckAuto
	case NATSAckAuto, NATSAckExplicit:
	default:
		return c, fmt.Errorf("%w: nats_ack %q (want auto or explicit)", ErrInvalid, c.NATSAck)
	}
	if c.DeadLetter != "-" {
		if err := validTopicName(TopicName(c.DeadLetter), true); err != nil {
			return c, fmt.Errorf("dead_letter: %w", err)
		}
	}
	return c, nil
}

// checkStart checks Start and the field that goes with it: start_seq only
// with "seq", start_time (RFC 3339) only with "time".
func (c GroupConfig) checkStart() error {
	switch c.Start {
	case "", StartEarliest, StartNew, StartSeq, StartTime:
	default:
		return fmt.Errorf("%w: start %q (want earliest, new, seq or time)", ErrInvalid, c.Start)
	}
	if c.Start == StartSeq && c.StartSeq < 1 {
		return fmt.Errorf("%w: start_seq %d out of range [1, %d] (start seq needs it)", ErrInvalid, c.StartSeq, int64(math.MaxInt64))
	}
	if c.Start != StartSeq && c.StartSeq != 0 {
		return fmt.Errorf("%w: start_seq needs start seq, not %q", ErrInvalid, c.Start)
	}
	if c.Start == StartTime {
		if _, err := c.startTime(); err != nil {
			return err
		}
	} else if c.StartTime != "" {
		return fmt.Errorf("%w: start_time needs start time, not %q", ErrInvalid, c.Start)
	}
	return nil
}

// startTime returns StartTime in Unix nanoseconds, the unit of the data
// log's record timestamps.
func (c GroupConfig) startTime() (int64, error) {
	tm, err := time.Parse(time.RFC3339Nano, c.StartTime)
	if err != nil {
		return 0, fmt.Errorf("%w: start_time %q is not an RFC 3339 time (like 2026-12-03T14:00:00Z)", ErrInvalid, c.StartTime)
	}
	if tm.Year() < 1679 || tm.Year() > 2261 { // within the range of Unix nanoseconds in an int64
		return 0, fmt.Errorf("%w: start_time %q out of range (years 1679 to 2261)", ErrInvalid, c.StartTime)
	}
	return tm.UnixNano(), nil
}

// Equal reports whether c and o are the same configuration (GroupConfig
// holds a slice, so == does not compile).
func (c GroupConfig) Equal(o GroupConfig) bool {
	if !slices.Equal(c.BackoffMs, o.BackoffMs) || !slices.Equal(c.Filter, o.Filter) {
		return false
	}
	c.BackoffMs, o.BackoffMs, c.Filter, o.Filter = nil, nil, nil, nil
	return reflect.DeepEqual(c, o)
}

// backoffNs is BackoffMs in nanoseconds (nil: none).
func (c GroupConfig) backoffNs() []int64 {
	if len(c.BackoffMs) == 0 {
		return nil
	}
	out := make([]int64, len(c.BackoffMs))
	for i, ms := range c.BackoffMs {
		out[i] = ms * 1e6
	}
	return out
}

// DeadLetterTopic returns the default dead-letter topic of a group:
// "$DLQ.<topic>.<group>".
func DeadLetterTopic(topic TopicName, group GroupName) string {
	return wire.DeadLetterTopic(string(topic), string(group))
}

// Resolve returns c with the defaults a topic named name would get, or the
// validation error CreateTopic would return. Callers compare it with an
// existing topic's Config to make creation idempotent.
func (c TopicConfig) Resolve(name TopicName) (TopicConfig, error) { return c.withDefaults(name) }

// Resolve returns c with the defaults a group named group of topic would
// get, or the validation error Topic.Group would return.
func (c GroupConfig) Resolve(topic TopicName, group GroupName) (GroupConfig, error) {
	return c.withDefaults(topic, group)
}
