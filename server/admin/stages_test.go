package admin

import (
	"math"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/stagetime"
)

// TestRebucket: a runtime histogram folds onto the exported bounds, each
// of its buckets under the first bound at or above its upper edge, counts
// cumulative.
func TestRebucket(t *testing.T) {
	inf := math.Inf(1)
	h := &metrics.Float64Histogram{
		Buckets: []float64{math.Inf(-1), 0, 0.5e-6, 1.5e-3, 1, inf},
		Counts:  []uint64{0, 2, 3, 4, 1},
	}
	n, sum, out := rebucket(h)
	if n != 10 {
		t.Fatalf("count %d, want 10", n)
	}
	want := 2*0.25e-6 + 3*(0.5e-6+1.5e-3)/2 + 4*(1.5e-3+1)/2 + 1*1
	if math.Abs(sum-want) > 1e-12 {
		t.Fatalf("sum %g, want %g", sum, want)
	}
	cases := []struct {
		bound float64
		cum   uint64
	}{
		{stageBounds[0], 2},                     // 1.024 µs: the two under 0.5 µs
		{stagetime.UpperBound(40).Seconds(), 2}, // 1.024 ms: nothing more below 1.5 ms
		{stagetime.UpperBound(44).Seconds(), 5}, // 2.048 ms: the three up to 1.5 ms
		{stagetime.UpperBound(80).Seconds(), 9}, // 1.07 s: the four up to 1 s
		{stageBounds[len(stageBounds)-1], 9},    // the one above 1 s has no finite edge
	}
	for _, tc := range cases {
		got, ok := out[tc.bound]
		if !ok {
			t.Fatalf("no bound %g in %v", tc.bound, out)
		}
		if got != tc.cum {
			t.Errorf("at %g: %d, want %d", tc.bound, got, tc.cum)
		}
	}
}

// TestExportedCounts: a recorder snapshot's cumulative counts at the
// exported bounds.
func TestExportedCounts(t *testing.T) {
	var h stagetime.Hist
	for _, d := range []time.Duration{500, 3 * time.Microsecond, 3 * time.Microsecond, time.Millisecond} {
		h.Observe(d)
	}
	out := exportedCounts(h.Snapshot())
	if len(out) != len(stageBounds) {
		t.Fatalf("%d bounds, want %d", len(out), len(stageBounds))
	}
	for _, tc := range []struct {
		le  time.Duration
		cum uint64
	}{{1024, 1}, {2048, 1}, {4096, 3}, {time.Duration(1) << 20, 4}} {
		if got := out[tc.le.Seconds()]; got != tc.cum {
			t.Errorf("at %v: %d, want %d", tc.le, got, tc.cum)
		}
	}
}
