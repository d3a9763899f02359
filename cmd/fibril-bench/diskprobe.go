package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The disk probe measures what the machine's disk gives a durable broker at
// the moment: blocks written and fdatasynced back to back, as a group
// commit does, into a file whose blocks are already written (as Fibril's
// reused segments are). A durable broker's latency tail can be no better
// than this fsync's, so bench/compare.sh records it before and after its
// runs.

// probeFileSize is the region the probe writes over and over.
const probeFileSize = 64 << 20

// diskStallLimits are the fsync durations the probe counts stalls over.
var diskStallLimits = [...]time.Duration{5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond}

// DiskResult is one disk probe.
type DiskResult struct {
	Dir         string  `json:"dir"`
	BlockBytes  int     `json:"block_bytes"`
	Seconds     float64 `json:"seconds"`
	Fsyncs      uint64  `json:"fsyncs"`
	PerSec      float64 `json:"fsyncs_per_sec"`
	P50Us       float64 `json:"p50_us"`
	P99Us       float64 `json:"p99_us"`
	P999Us      float64 `json:"p999_us"`
	MaxUs       float64 `json:"max_us"`
	Over5ms     int     `json:"over_5ms"`
	Over20ms    int     `json:"over_20ms"`
	Over50ms    int     `json:"over_50ms"`
	Over200ms   int     `json:"over_200ms"`
	StalledSecs float64 `json:"stalled_seconds"` // time spent in fsyncs over 5 ms
}

// probeDisk writes block bytes and fdatasyncs them, back to back, for d,
// in a temporary file under dir (removed at the end). ctx ends it early.
func probeDisk(ctx context.Context, dir string, block int, d time.Duration) (*DiskResult, error) {
	if block < 512 || block > probeFileSize {
		return nil, fmt.Errorf("disk probe: block of %d bytes: want 512..%d", block, probeFileSize)
	}
	f, err := os.CreateTemp(dir, "fibril-bench-disk-*")
	if err != nil {
		return nil, fmt.Errorf("disk probe: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 1<<20)
	for off := int64(0); off < probeFileSize; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf, off); err != nil {
			return nil, fmt.Errorf("disk probe: fill %s: %w", f.Name(), err)
		}
	}
	if err := fdatasync(f); err != nil {
		return nil, err
	}
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	buf = buf[:block]
	var h Histogram
	r := &DiskResult{Dir: dir, BlockBytes: block}
	over := [len(diskStallLimits)]int{}
	var stalled time.Duration
	start := time.Now()
	for off := int64(0); time.Since(start) < d && ctx.Err() == nil; off = (off + int64(block)) % (probeFileSize - int64(block)) {
		if _, err := f.WriteAt(buf, off); err != nil {
			return nil, fmt.Errorf("disk probe: write %s: %w", f.Name(), err)
		}
		t := time.Now()
		if err := fdatasync(f); err != nil {
			return nil, err
		}
		took := time.Since(t)
		h.Add(int64(took))
		for i, lim := range diskStallLimits {
			if took > lim {
				over[i]++
			}
		}
		if took > diskStallLimits[0] {
			stalled += took
		}
	}
	el := time.Since(start)
	us := func(q float64) float64 { return float64(h.Quantile(q)) / 1e3 }
	r.Seconds, r.Fsyncs = el.Seconds(), h.Count()
	r.PerSec = float64(r.Fsyncs) / el.Seconds()
	r.P50Us, r.P99Us, r.P999Us, r.MaxUs = us(0.5), us(0.99), us(0.999), us(1)
	r.Over5ms, r.Over20ms, r.Over50ms, r.Over200ms = over[0], over[1], over[2], over[3]
	r.StalledSecs = stalled.Seconds()
	return r, nil
}

func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if !errors.Is(err, unix.EINTR) {
			if err != nil {
				return fmt.Errorf("disk probe: fdatasync %s: %w", f.Name(), err)
			}
			return nil
		}
	}
}

func (r *DiskResult) writeText(w io.Writer) {
	fmt.Fprintf(w, "disk %s: fdatasync of %d KiB back to back for %.1f s: %d (%.0f/s), p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.1f ms; over 5/20/50/200 ms: %d/%d/%d/%d (%.2f s stalled)\n",
		r.Dir, r.BlockBytes>>10, r.Seconds, r.Fsyncs, r.PerSec, r.P50Us/1e3, r.P99Us/1e3, r.P999Us/1e3, r.MaxUs/1e3,
		r.Over5ms, r.Over20ms, r.Over50ms, r.Over200ms, r.StalledSecs)
}
