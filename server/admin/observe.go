package admin

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ServerTotals are a server's counters since it started.
type ServerTotals struct {
	Connections uint64 `json:"connections_total"` // connections admitted
	InMsgs      uint64 `json:"in_msgs"`
	OutMsgs     uint64 `json:"out_msgs"`
	InBytes     uint64 `json:"in_bytes"`
	OutBytes    uint64 `json:"out_bytes"`
}

// TotalsSource is implemented by a ConnSource that also keeps server-wide
// counters (they survive the connections that made them). Totals must not
// block.
type TotalsSource interface {
	Totals() ServerTotals
}

// SyncMetrics is a broker.Observer that feeds the fsync latency histogram
// and the group-commit batch size histogram of /metrics. Create it with
// NewSyncMetrics, pass it as broker.Options.Observer and as
// Options.Sync. It is safe for concurrent use and never blocks.
type SyncMetrics struct {
	latency prometheus.Histogram
	batch   prometheus.Histogram
}

// NewSyncMetrics returns an empty SyncMetrics.
func NewSyncMetrics() *SyncMetrics {
	return &SyncMetrics{
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fibril_fsync_seconds",
			Help:    "Duration of each fsync that made records durable (a data log or a consumer-state event log).",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16), // 50µs .. ~1.6s
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fibril_group_commit_batch_messages",
			Help:    "Published messages made durable by one fsync (group-commit batch size; 0 for an fsync of a consumer-state event log).",
			Buckets: []float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096},
		}),
	}
}

// ObserveSync implements broker.Observer.
func (m *SyncMetrics) ObserveSync(d time.Duration, records int) {
	m.latency.Observe(d.Seconds())
	m.batch.Observe(float64(records))
}

func (m *SyncMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.latency, m.batch}
}
