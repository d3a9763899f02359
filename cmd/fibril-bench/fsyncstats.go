package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// FsyncStats is what a started Fibril server's own fsync histogram
// (fibril_fsync_seconds on its /metrics) says about the disk during the
// run: every fsync of its data and event logs, warm-up included. A
// delivery waits for the fsync that makes it durable, so fsyncs over a few
// milliseconds are what a durable latency tail is made of.
type FsyncStats struct {
	Count   uint64  `json:"count"`
	Seconds float64 `json:"seconds"` // their total duration
	// Over counts the fsyncs longer than each histogram bound from 6.4 ms
	// up ("0.0064": over 6.4 ms), as the server's buckets have them.
	Over map[string]uint64 `json:"over"`
	// MaxBelowS is the smallest bucket bound no fsync exceeded (0 when one
	// exceeded them all).
	MaxBelowS float64 `json:"max_below_s"`
}

// fsyncStatsFrom is the least bound Over reports.
const fsyncStatsFrom = 0.0064

// serverFsyncs is scrapeFsyncs for a Result: the stats, or why there are
// none (a run's figures stand without them).
func serverFsyncs(ctx context.Context, base string) (*FsyncStats, string) {
	st, err := scrapeFsyncs(ctx, base)
	if err != nil {
		return nil, err.Error()
	}
	return st, ""
}

// scrapeFsyncs reads the fsync histogram from a Fibril admin listener.
func scrapeFsyncs(ctx context.Context, base string) (*FsyncStats, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s/metrics: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s/metrics: %s", base, resp.Status)
	}
	return parseFsyncs(resp.Body)
}

// parseFsyncs takes fibril_fsync_seconds out of a /metrics page.
func parseFsyncs(r io.Reader) (*FsyncStats, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	fam := fams["fibril_fsync_seconds"]
	if fam == nil || len(fam.GetMetric()) != 1 || fam.GetMetric()[0].GetHistogram() == nil {
		return nil, fmt.Errorf("parse /metrics: no fibril_fsync_seconds histogram")
	}
	h := fam.GetMetric()[0].GetHistogram()
	st := &FsyncStats{Count: h.GetSampleCount(), Seconds: h.GetSampleSum(), Over: map[string]uint64{}}
	for _, b := range h.GetBucket() {
		le, n := b.GetUpperBound(), b.GetCumulativeCount()
		if le >= fsyncStatsFrom*0.999 && !math.IsInf(le, 1) {
			st.Over[fmt.Sprint(le)] = st.Count - n
		}
		if n == st.Count && !math.IsInf(le, 1) && (st.MaxBelowS == 0 || le < st.MaxBelowS) {
			st.MaxBelowS = le
		}
	}
	return st, nil
}

func (f *FsyncStats) writeText(w io.Writer) {
	fmt.Fprintf(w, "server    %d fsyncs, %.2f s in them; over 6.4 / 51.2 / 204.8 ms: %d / %d / %d; none over %s\n",
		f.Count, f.Seconds, f.Over["0.0064"], f.Over["0.0512"], f.Over["0.2048"], fmtBound(f.MaxBelowS))
}

func fmtBound(s float64) string {
	if s == 0 {
		return "the largest bound"
	}
	return fmt.Sprintf("%.4g ms", s*1e3)
}
