package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// metricsPage is a /metrics page with fibril_fsync_seconds buckets as the
// server has them (50 µs doubling) holding the given cumulative counts.
func metricsPage(count uint64, sum float64, cum []uint64) string {
	var b strings.Builder
	b.WriteString("# HELP fibril_fsync_seconds x\n# TYPE fibril_fsync_seconds histogram\n")
	le := 50e-6
	for _, n := range cum {
		fmt.Fprintf(&b, "fibril_fsync_seconds_bucket{le=\"%g\"} %d\n", le, n)
		le *= 2
	}
	fmt.Fprintf(&b, "fibril_fsync_seconds_bucket{le=\"+Inf\"} %d\nfibril_fsync_seconds_sum %g\nfibril_fsync_seconds_count %d\n", count, sum, count)
	b.WriteString("# TYPE go_goroutines gauge\ngo_goroutines 12\n")
	return b.String()
}

func TestParseFsyncs(t *testing.T) {
	//               50µs 100 200 400 800 1.6ms 3.2 6.4 12.8 25.6 51.2 102.4 204.8 409.6 819.2 1638.4
	quiet := []uint64{0, 10, 50, 90, 99, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100}
	stalls := []uint64{0, 10, 50, 90, 95, 96, 96, 96, 97, 97, 98, 98, 99, 99, 99, 99}
	for _, tc := range []struct {
		name             string
		page             string
		count            uint64
		o64, o512, o2048 uint64
		maxBelow         float64
	}{
		{"quiet disk", metricsPage(100, 0.05, quiet), 100, 0, 0, 0, 0.0016},
		{"stalls", metricsPage(100, 2.5, stalls), 100, 4, 2, 1, 0},
		{"none yet", metricsPage(0, 0, make([]uint64, 16)), 0, 0, 0, 0, 50e-6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseFsyncs(strings.NewReader(tc.page))
			if err != nil {
				t.Fatal(err)
			}
			if f.Count != tc.count || f.Over["0.0064"] != tc.o64 || f.Over["0.0512"] != tc.o512 || f.Over["0.2048"] != tc.o2048 {
				t.Fatalf("got %+v, want count %d over 6.4/51.2/204.8 ms %d/%d/%d", f, tc.count, tc.o64, tc.o512, tc.o2048)
			}
			if f.MaxBelowS != tc.maxBelow {
				t.Fatalf("max below %g, want %g", f.MaxBelowS, tc.maxBelow)
			}
			if _, ok := f.Over["0.0032"]; ok {
				t.Fatalf("bounds under 6.4 ms reported: %v", f.Over)
			}
		})
	}
	for _, bad := range []string{"", "go_goroutines 12\n", "fibril_fsync_seconds{ 1\n"} {
		if _, err := parseFsyncs(strings.NewReader(bad)); err == nil {
			t.Errorf("parseFsyncs(%q): no error", bad)
		}
	}
}

// TestServerFsyncsUnreachableIsReported: a /metrics that cannot be read
// leaves the result without fsync stats and says why. Regression: the
// error was printed to runBench's progress writer, which may be nil (a
// panic at the end of a finished run).
func TestServerFsyncsUnreachableIsReported(t *testing.T) {
	st, why := serverFsyncs(context.Background(), "http://127.0.0.1:1")
	if st != nil || !strings.Contains(why, "/metrics") {
		t.Fatalf("stats %+v, error %q", st, why)
	}
	var b strings.Builder
	(&Result{ServerFsyncsError: why}).writeText(&b)
	if !strings.Contains(b.String(), "fsyncs unknown") {
		t.Fatalf("text output lacks the reason:\n%s", b.String())
	}
}
