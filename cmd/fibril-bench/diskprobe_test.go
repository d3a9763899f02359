package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

func TestProbeDisk(t *testing.T) {
	dir := t.TempDir()
	r, err := probeDisk(context.Background(), dir, 4096, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Fsyncs == 0 || r.PerSec <= 0 || r.Seconds < 0.2 {
		t.Fatalf("probe measured nothing: %+v", r)
	}
	if !(r.P50Us > 0 && r.P50Us <= r.P99Us && r.P99Us <= r.P999Us && r.P999Us <= r.MaxUs) {
		t.Fatalf("percentiles out of order: %+v", r)
	}
	if r.Over5ms < r.Over20ms || r.Over20ms < r.Over50ms || r.Over50ms < r.Over200ms || uint64(r.Over5ms) > r.Fsyncs {
		t.Fatalf("stall counts inconsistent: %+v", r)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("probe left %d files in %s", len(ents), dir)
	}
}

func TestProbeDiskRefusesBadInput(t *testing.T) {
	for _, block := range []int{0, 100, probeFileSize + 1} {
		if _, err := probeDisk(context.Background(), t.TempDir(), block, time.Millisecond); err == nil {
			t.Errorf("block %d: no error", block)
		}
	}
	if _, err := probeDisk(context.Background(), "/nonexistent/fibril-bench", 4096, time.Millisecond); err == nil {
		t.Error("missing directory: no error")
	}
}

func TestDiskProbeCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--disk-probe", "100ms", "--disk-probe-block", "8192", "--json", "--disk-probe-dir", t.TempDir()}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r DiskResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("JSON %q: %v", out.String(), err)
	}
	if r.BlockBytes != 8192 || r.Fsyncs == 0 {
		t.Fatalf("result %+v", r)
	}
	out.Reset()
	if code := run([]string{"--disk-probe", "50ms", "--disk-probe-dir", t.TempDir()}, &out, &errb); code != 0 || !strings.Contains(out.String(), "fdatasync of 128 KiB back to back") {
		t.Fatalf("text mode: exit %d, %q", code, out.String())
	}
	if code := run([]string{"--disk-probe", "50ms", "--disk-probe-dir", "/nonexistent/x"}, &out, &errb); code != 1 {
		t.Fatalf("missing directory: exit %d, want 1", code)
	}
}
