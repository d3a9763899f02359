package main

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
)

// stagesPage is a /metrics page with fibril_stage_seconds for the given
// stages, each with 100 samples: cum gives the cumulative counts at the
// bounds 1 ms, 2 ms, 4 ms, 8 ms.
func stagesPage(stages map[string][]uint64) string {
	var b strings.Builder
	b.WriteString("# HELP fibril_stage_seconds x\n# TYPE fibril_stage_seconds histogram\n")
	for stage, cum := range stages {
		le := 0.001
		for _, n := range cum {
			fmt.Fprintf(&b, "fibril_stage_seconds_bucket{chain=\"publish\",stage=%q,le=\"%g\"} %d\n", stage, le, n)
			le *= 2
		}
		fmt.Fprintf(&b, "fibril_stage_seconds_bucket{chain=\"publish\",stage=%q,le=\"+Inf\"} 100\n", stage)
		fmt.Fprintf(&b, "fibril_stage_seconds_sum{chain=\"publish\",stage=%q} 0.2\n", stage)
		fmt.Fprintf(&b, "fibril_stage_seconds_count{chain=\"publish\",stage=%q} 100\n", stage)
	}
	b.WriteString("# TYPE fibril_go_gc_pause_seconds histogram\nfibril_go_gc_pause_seconds_bucket{le=\"0.001\"} 3\nfibril_go_gc_pause_seconds_bucket{le=\"+Inf\"} 3\nfibril_go_gc_pause_seconds_sum 0.0006\nfibril_go_gc_pause_seconds_count 3\n")
	return b.String()
}

// TestParseStages: stages come out in path order with interpolated
// quantiles, the runtime pauses beside them; a page without stage
// accounting is an error.
func TestParseStages(t *testing.T) {
	page := stagesPage(map[string][]uint64{
		"fsync_end": {0, 50, 98, 100}, // p50 at 2 ms, p99 halfway into 4..8 ms
		"parsed":    {100, 100, 100, 100},
		"appended":  {90, 100, 100, 100},
	})
	st, err := parseStages(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, f := range st.Stages {
		order = append(order, f.Stage)
	}
	if got := strings.Join(order, ","); got != "parsed,appended,fsync_end" {
		t.Fatalf("stages in order %s", got)
	}
	cases := []struct {
		stage    string
		p50, p99 float64 // µs
	}{
		{"parsed", 500, 990},
		{"appended", 555.6, 1900},
		{"fsync_end", 2000, 6000},
	}
	for i, tc := range cases {
		f := st.Stages[i]
		if f.Count != 100 || math.Abs(f.MeanUS-2000) > 0.01 {
			t.Errorf("%s: count %d mean %v", tc.stage, f.Count, f.MeanUS)
		}
		if math.Abs(f.P50US-tc.p50) > 0.1 || math.Abs(f.P99US-tc.p99) > 0.1 {
			t.Errorf("%s: p50 %.1f p99 %.1f, want %.1f %.1f", tc.stage, f.P50US, f.P99US, tc.p50, tc.p99)
		}
	}
	if st.GCPause == nil || st.GCPause.Count != 3 || math.Abs(st.GCPause.MeanUS-200) > 0.01 {
		t.Fatalf("gc pauses %+v", st.GCPause)
	}
	var b bytes.Buffer
	st.writeText(&b)
	if !strings.Contains(b.String(), "fsync_end") || !strings.Contains(b.String(), "GC pauses") {
		t.Fatalf("table lacks rows:\n%s", b.String())
	}
	if _, err := parseStages(strings.NewReader("go_goroutines 12\n")); err == nil {
		t.Fatal("a page without fibril_stage_seconds parsed")
	}
}
