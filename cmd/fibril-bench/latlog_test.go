package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The log keeps every entry across chunk boundaries, whether it reserved
// enough chunks up front or has to add some.
func TestLatLogChunks(t *testing.T) {
	for _, c := range []struct {
		name          string
		expect, count int64
	}{
		{"reserved", 3 * latChunk, 2*latChunk + 5},
		{"grows", 0, 3*latChunk + 1},
		{"exact", latChunk, latChunk},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLatLog(0, c.expect)
			for i := range c.count {
				l.add(i, 2*i)
			}
			if n := l.len(); int64(n) != c.count {
				t.Fatalf("len %d, want %d", n, c.count)
			}
			var i int64
			for _, ch := range l.chunks {
				for _, e := range ch {
					if e.sent != i || e.lat != 2*i {
						t.Fatalf("entry %d = %+v", i, e)
					}
					i++
				}
			}
		})
	}
}

// A run with --latency-log writes one line per message, sorted by send
// time, whose latencies agree with the reported percentiles.
func TestLatencyLogOfARun(t *testing.T) {
	cfg := tinyConfig()
	cfg.Subs = 2
	cfg.LatencyLog = filepath.Join(t.TempDir(), "lat.txt")
	res, err := runBench(context.Background(), cfg, nil)
	if err != nil {
		t.Fatalf("runBench: %v", err)
	}
	f, err := os.Open(cfg.LatencyLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lats []int64
	var prev int64
	consumers := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 {
			t.Fatalf("line %q", sc.Text())
		}
		sent, err1 := strconv.ParseInt(fs[0], 10, 64)
		lat, err2 := strconv.ParseInt(fs[1], 10, 64)
		if err1 != nil || err2 != nil || lat <= 0 || sent < prev {
			t.Fatalf("line %q after send time %d", sc.Text(), prev)
		}
		prev = sent
		consumers[fs[2]] = true
		lats = append(lats, lat)
	}
	if int64(len(lats)) != cfg.Msgs || uint64(len(lats)) != res.LatencyUS.Count {
		t.Fatalf("%d lines, want %d (histogram %d)", len(lats), cfg.Msgs, res.LatencyUS.Count)
	}
	if len(consumers) != 2 {
		t.Fatalf("consumers in the log: %v", consumers)
	}
	slices.Sort(lats)
	p50 := float64(lats[len(lats)/2]) / 1e3
	if p50 < res.LatencyUS.P50*0.8 || p50 > res.LatencyUS.P50*1.25 {
		t.Fatalf("log p50 %.0f µs, histogram p50 %.0f µs", p50, res.LatencyUS.P50)
	}
}
