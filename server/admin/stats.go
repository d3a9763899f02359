package admin

import (
	"strings"
	"time"

	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
)

// TopicStats is the JSON view of one topic (GET /api/topics/{name}); the
// dashboard and metrics are built from it.
type TopicStats struct {
	Name string `json:"name"`
	ID   uint32 `json:"id"`
	// DeadLetter is true for a dead-letter topic ("$DLQ.<topic>.<group>").
	DeadLetter bool               `json:"dead_letter"`
	Config     broker.TopicConfig `json:"config"`
	// Published counts every message ever stored (the sum of the
	// partitions' last sequence numbers): a counter to derive rates from.
	Published uint64 `json:"published"`
	// Messages is how many are retained, Unsettled how many some group has
	// not settled yet, Bytes an estimate of the retained size.
	Messages   int64            `json:"messages"`
	Unsettled  int64            `json:"unsettled"`
	Bytes      int64            `json:"bytes"`
	Partitions []PartitionStats `json:"partitions"`
	Groups     []GroupStats     `json:"groups"`
}

// PartitionStats is one partition of a topic.
type PartitionStats struct {
	Partition uint32 `json:"partition"`
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	DiskBytes int64  `json:"disk_bytes"`
	// RestoredEvents: consumer events the engine's start restored from
	// their side copies in the data log (broker.PartitionInfo).
	RestoredEvents uint64 `json:"restored_events"`
}

// GroupStats is the JSON view of one consumer group.
type GroupStats struct {
	Topic  string             `json:"topic"`
	Name   string             `json:"name"`
	ID     uint32             `json:"id"`
	Config broker.GroupConfig `json:"config"`
	// Lag is what the group has not settled yet (in flight included).
	Lag int64 `json:"lag"`
	// Inflight is leased now; Ready is Lag minus Inflight.
	Inflight int64 `json:"inflight"`
	Ready    int64 `json:"ready"`
	// Settled is derived: the topic's Published minus Lag (acked and
	// dead-lettered; see the package Caveats). It only grows.
	Settled uint64 `json:"settled"`
	// OldestUnackedMs is the age of the oldest unsettled message (0: none).
	OldestUnackedMs int64 `json:"oldest_unacked_ms"`
	// Paused is true while the group is paused (POST .../pause).
	Paused bool `json:"paused"`
	// The group's counters over its life, kept across restarts
	// (delivered, acked, ...; broker.GroupCounters).
	broker.GroupCounters
}

// Overview is the answer of GET /api/topics.
type Overview struct {
	Server string       `json:"server"`
	Time   time.Time    `json:"time"`
	Topics []TopicStats `json:"topics"`
	// Connections is the number of client connections, -1 when unknown.
	Connections int `json:"connections"`
	// Sync is the engine's commit totals (fsyncs, their time, the messages
	// they made durable), for the dashboard's fsync latency chart; zero for
	// identities that may not read /metrics.
	Sync broker.BrokerStats `json:"sync"`
}

func isDeadLetter(name string) bool { return strings.HasPrefix(name, "$DLQ.") }

// topicStats reads t's Info views; it never waits on the partition actors.
func topicStats(t *broker.Topic) TopicStats {
	in := t.Info()
	ts := TopicStats{
		Name: string(in.Name), ID: uint32(in.ID), DeadLetter: isDeadLetter(string(in.Name)),
		Config: in.Config, Messages: in.Messages, Unsettled: in.Unsettled, Bytes: in.Bytes,
		Partitions: make([]PartitionStats, 0, len(in.Partitions)),
		Groups:     []GroupStats{},
	}
	for i, p := range in.Partitions {
		ts.Published += uint64(p.LastSeq)
		ts.Partitions = append(ts.Partitions, PartitionStats{Partition: uint32(i), FirstSeq: uint64(p.FirstSeq), LastSeq: uint64(p.LastSeq), DiskBytes: p.DiskBytes, RestoredEvents: p.RestoredEvents})
	}
	for _, g := range t.Groups() {
		ts.Groups = append(ts.Groups, groupStats(g, ts.Published))
	}
	return ts
}

func groupStats(g *broker.Group, published uint64) GroupStats {
	in := g.Info()
	gs := GroupStats{
		Topic: string(in.Topic), Name: string(in.Name), ID: uint32(in.ID), Config: in.Config,
		Lag: max(in.Pending, 0), Inflight: max(in.Inflight, 0),
		OldestUnackedMs: in.OldestUnackedMs, Paused: in.Paused, GroupCounters: in.GroupCounters,
	}
	gs.Ready = max(gs.Lag-gs.Inflight, 0)
	if uint64(gs.Lag) < published {
		gs.Settled = published - uint64(gs.Lag)
	}
	return gs
}

// overview lists the topics id may view; the connection count is for
// identities that may read /metrics (which has it too), else -1.
func overview(b *broker.Broker, name string, conns ConnSource, id *access.Identity) Overview {
	ov := Overview{Server: name, Time: time.Now().UTC(), Topics: []TopicStats{}, Connections: -1}
	for _, t := range b.Topics() {
		if id.Can(access.ViewTopic, accessTopic(t)) {
			ov.Topics = append(ov.Topics, topicStats(t))
		}
	}
	if conns != nil && id.Can(access.ViewMetrics, nil) {
		ov.Connections = len(conns.Connections())
	}
	if id.Can(access.ViewMetrics, nil) {
		ov.Sync = b.Stats()
	}
	return ov
}
