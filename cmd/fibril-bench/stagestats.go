package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// StageStats is a started Fibril server's stage accounting at the end of
// the run (fibril_stage_seconds on its /metrics, warm-up included): for
// each stage of a sampled publish's path, the time from its chain's
// origin, so a chain's stages are cumulative, and the Go runtime's pauses.
type StageStats struct {
	Stages []StageFigure `json:"stages"`
	// GCPause and SchedLatency are the server's Go runtime pauses over
	// its life: stop-the-world GC pauses, and the time goroutines waited
	// runnable for a CPU.
	GCPause      *StageFigure `json:"gc_pause,omitempty"`
	SchedLatency *StageFigure `json:"sched_latency,omitempty"`
}

// StageFigure is one histogram's summary; quantiles are interpolated in
// buckets about 1.4× wide.
type StageFigure struct {
	Chain  string  `json:"chain,omitempty"`
	Stage  string  `json:"stage,omitempty"`
	Count  uint64  `json:"count"`
	MeanUS float64 `json:"mean_us"`
	P50US  float64 `json:"p50_us"`
	P99US  float64 `json:"p99_us"`
	P999US float64 `json:"p999_us"`
}

// stageOrder is the servers' order of stages (their path), for the table.
var stageOrder = []string{"parsed", "enqueued", "picked_up", "appended", "fsync_start", "fsync_end",
	"confirmed", "confirm_written", "delivery_written", "ack_parsed", "ack_durable"}

// serverStages is scrapeStages for a Result: the stats, or why there are
// none.
func serverStages(ctx context.Context, base string) (*StageStats, string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Sprintf("scrape %s/metrics: %v", base, err)
	}
	defer resp.Body.Close()
	st, err := parseStages(resp.Body)
	if err != nil {
		return nil, err.Error()
	}
	return st, ""
}

// parseStages takes the stage histograms out of a /metrics page.
func parseStages(r io.Reader) (*StageStats, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	fam := fams["fibril_stage_seconds"]
	if fam == nil {
		return nil, fmt.Errorf("parse /metrics: no fibril_stage_seconds (a server without stage accounting)")
	}
	st := &StageStats{}
	for _, m := range fam.GetMetric() {
		if m.GetHistogram() == nil {
			continue
		}
		f := figureOf(m.GetHistogram())
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "chain":
				f.Chain = l.GetValue()
			case "stage":
				f.Stage = l.GetValue()
			}
		}
		st.Stages = append(st.Stages, f)
	}
	rank := map[string]int{}
	for i, s := range stageOrder {
		rank[s] = i + 1
	}
	sort.SliceStable(st.Stages, func(i, j int) bool {
		ri, rj := rank[st.Stages[i].Stage], rank[st.Stages[j].Stage]
		if ri == 0 || rj == 0 {
			return ri != 0 // unknown stages last
		}
		return ri < rj
	})
	for name, dst := range map[string]**StageFigure{"fibril_go_gc_pause_seconds": &st.GCPause, "fibril_go_sched_latency_seconds": &st.SchedLatency} {
		if f := fams[name]; f != nil && len(f.GetMetric()) == 1 && f.GetMetric()[0].GetHistogram() != nil {
			fig := figureOf(f.GetMetric()[0].GetHistogram())
			*dst = &fig
		}
	}
	return st, nil
}

// figureOf summarises a histogram.
func figureOf(h *dto.Histogram) StageFigure {
	f := StageFigure{Count: h.GetSampleCount()}
	if f.Count == 0 {
		return f
	}
	f.MeanUS = h.GetSampleSum() / float64(f.Count) * 1e6
	f.P50US = histQuantile(h, 0.5) * 1e6
	f.P99US = histQuantile(h, 0.99) * 1e6
	f.P999US = histQuantile(h, 0.999) * 1e6
	return f
}

// histQuantile is Prometheus' histogram_quantile: the q-quantile by linear
// interpolation in the bucket that holds it (its upper bound past the last
// finite bound).
func histQuantile(h *dto.Histogram, q float64) float64 {
	n := h.GetSampleCount()
	if n == 0 {
		return 0
	}
	rank := q * float64(n)
	lo, below := 0.0, uint64(0)
	for _, b := range h.GetBucket() {
		le, cum := b.GetUpperBound(), b.GetCumulativeCount()
		if float64(cum) >= rank {
			if math.IsInf(le, 1) {
				return lo
			}
			in := cum - below
			if in == 0 {
				return le
			}
			return lo + (le-lo)*(rank-float64(below))/float64(in)
		}
		lo, below = le, cum
	}
	return lo
}

func (s *StageStats) writeText(w io.Writer) {
	fmt.Fprintf(w, "stages    server, sampled (first PUB / settle of a read, at most one each per 0.5 ms; first delivery of each POLL answer, every 64th pushed); from each chain's origin:\n")
	fmt.Fprintf(w, "          %-8s %-16s %8s %9s %9s %9s %9s %9s\n", "chain", "stage", "samples", "mean", "+mean", "p50", "p99", "p99.9")
	prev := map[string]float64{}
	for _, f := range s.Stages {
		d := f.MeanUS - prev[f.Chain]
		prev[f.Chain] = f.MeanUS
		fmt.Fprintf(w, "          %-8s %-16s %8d %9s %9s %9s %9s %9s\n", f.Chain, f.Stage, f.Count,
			fmtUS(f.MeanUS), fmtUS(d), fmtUS(f.P50US), fmtUS(f.P99US), fmtUS(f.P999US))
	}
	for _, r := range []struct {
		name string
		f    *StageFigure
	}{{"GC pauses", s.GCPause}, {"sched latency", s.SchedLatency}} {
		if r.f != nil {
			fmt.Fprintf(w, "          go       %-16s %8d %9s %9s %9s %9s %9s\n", r.name, r.f.Count,
				fmtUS(r.f.MeanUS), "", fmtUS(r.f.P50US), fmtUS(r.f.P99US), fmtUS(r.f.P999US))
		}
	}
}
