package admin

// The stage accounting on /metrics (server/stagetime): one histogram per
// stage of a publish's path, fibril_stage_seconds{chain,stage}, each
// measured from its chain's origin (so a chain's stages are cumulative),
// and the Go runtime's pauses that add to every stage:
// fibril_go_gc_pause_seconds (stop-the-world pauses) and
// fibril_go_sched_latency_seconds (time goroutines waited runnable), from
// runtime/metrics.

import (
	"math"
	"runtime/metrics"

	"github.com/fibrilmq/fibril/server/stagetime"
	"github.com/prometheus/client_golang/prometheus"
)

// exportEvery: the exported buckets are every second one of the
// recorder's, two per octave (bounds a factor of about 1.4 apart).
const exportEvery = 2

// stageBounds are the exported bucket bounds in seconds, 1.024 µs .. 34 s.
var stageBounds = func() []float64 {
	var b []float64
	for i := 0; i < stagetime.NumBuckets; i += exportEvery {
		b = append(b, stagetime.UpperBound(i).Seconds())
	}
	return b
}()

type stageCollector struct {
	rec                   *stagetime.Recorder
	stage, gcPause, sched *prometheus.Desc
}

func newStageCollector(rec *stagetime.Recorder) *stageCollector {
	return &stageCollector{
		rec: rec,
		stage: prometheus.NewDesc("fibril_stage_seconds",
			"Time from a sampled command's origin (chain publish: the socket read of the PUB; delivery: the append that stored the message; ack: the socket read of the ACK) to the stage; a chain's stages are cumulative.",
			[]string{"chain", "stage"}, nil),
		gcPause: prometheus.NewDesc("fibril_go_gc_pause_seconds",
			"Go runtime stop-the-world pauses (runtime/metrics /sched/pauses/total/gc:seconds).", nil, nil),
		sched: prometheus.NewDesc("fibril_go_sched_latency_seconds",
			"Time goroutines spent runnable before running (runtime/metrics /sched/latencies:seconds).", nil, nil),
	}
}

func (c *stageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.stage
	ch <- c.gcPause
	ch <- c.sched
}

func (c *stageCollector) Collect(ch chan<- prometheus.Metric) {
	for s := stagetime.Stage(0); s < stagetime.NumStages; s++ {
		snap := c.rec.Snapshot(s)
		buckets := exportedCounts(snap)
		ch <- prometheus.MustNewConstHistogram(c.stage, snap.Count, snap.Sum.Seconds(), buckets, s.Chain(), s.String())
	}
	samples := []metrics.Sample{{Name: "/sched/pauses/total/gc:seconds"}, {Name: "/sched/latencies:seconds"}}
	metrics.Read(samples)
	for i, d := range []*prometheus.Desc{c.gcPause, c.sched} {
		if samples[i].Value.Kind() != metrics.KindFloat64Histogram {
			continue // not offered by this Go version
		}
		n, sum, b := rebucket(samples[i].Value.Float64Histogram())
		ch <- prometheus.MustNewConstHistogram(d, n, sum, b)
	}
}

// exportedCounts is a snapshot's cumulative count at each exported bound
// (the bounds of every exportEvery-th bucket).
func exportedCounts(s stagetime.Snapshot) map[float64]uint64 {
	out := make(map[float64]uint64, len(stageBounds))
	var cum uint64
	for i, n := range s.Counts {
		cum += n
		if i%exportEvery == 0 {
			out[stagetime.UpperBound(i).Seconds()] = cum
		}
	}
	return out
}

// rebucket folds a runtime histogram onto stageBounds: each of its
// buckets counts under the first bound at or above its upper edge. The
// sum is estimated from the buckets' midpoints (the runtime keeps none).
func rebucket(h *metrics.Float64Histogram) (count uint64, sum float64, out map[float64]uint64) {
	out = make(map[float64]uint64, len(stageBounds))
	per := make([]uint64, len(stageBounds))
	for i, n := range h.Counts {
		if n == 0 {
			continue
		}
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		count += n
		var mid float64
		switch {
		case math.IsInf(lo, -1):
			mid = hi
		case math.IsInf(hi, 1):
			mid = lo
		default:
			mid = (lo + hi) / 2
		}
		sum += mid * float64(n)
		for j, b := range stageBounds {
			if hi <= b {
				per[j] += n
				break
			}
		}
	}
	var cum uint64
	for j, b := range stageBounds {
		cum += per[j]
		out[b] = cum
	}
	return count, sum, out
}
