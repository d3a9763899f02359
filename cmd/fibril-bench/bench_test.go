package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// tinyConfig is a small run against an in-process Fibril server on
// 127.0.0.1:0 (a real server: gnet, broker, files in a temp dir).
func tinyConfig() Config {
	c := defaultConfig()
	c.Embed = true
	c.Msgs = 3000
	c.Progress = 0
	c.Timeout = 45 * time.Second
	c.Stall = 2 * time.Second
	return c
}

func TestRunVerifiedAgainstRealServer(t *testing.T) {
	cases := []struct {
		name string
		mod  func(c *Config)
	}{
		{"pull batch ack", func(c *Config) {}},
		{"pull ack each sync durability", func(c *Config) { c.Ack = "each"; c.Durability = "sync"; c.Msgs = 500 }},
		{"push 3x2 partitions 3", func(c *Config) {
			c.Consume = "push"
			c.Pubs, c.Subs, c.Partitions, c.Credit = 3, 2, 3, 64
		}},
		{"backlog", func(c *Config) { c.Backlog = true; c.Batch = 100 }},
		{"small window and batch, 16 B", func(c *Config) { c.Window, c.Batch, c.Size, c.Msgs = 4, 7, 16, 1000 }},
		{"one POLL outstanding", func(c *Config) { c.PollDepth, c.Batch = 1, 50 }},
		{"five POLLs outstanding, 2 consumers", func(c *Config) { c.PollDepth, c.Subs, c.Batch = 5, 2, 30 }},
		{"duration", func(c *Config) { c.Duration = 300 * time.Millisecond; c.Pubs = 2 }},
		{"rate limited", func(c *Config) { c.Rate = 20000; c.Msgs = 1000 }},
		{"Go SDK client, 2x2, batch over one ACK line", func(c *Config) { c.Client = "sdk"; c.Pubs, c.Subs = 2, 2; c.Batch = 700 }},
		{"plain pub/sub, 2 subscribers", func(c *Config) { c.Mode = "plain"; c.Subs = 2 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tinyConfig()
			tc.mod(&cfg)
			res, err := runBench(context.Background(), cfg, nil)
			if err != nil {
				t.Fatalf("runBench: %v", err)
			}
			want := uint64(cfg.Msgs)
			if cfg.Duration > 0 {
				want = res.Published // whatever was sent in the time
				if want == 0 {
					t.Fatal("nothing published in the duration")
				}
			}
			subs := uint64(1)
			if cfg.Mode == "plain" {
				subs = uint64(cfg.Subs)
			}
			if !res.Verify.OK || res.Published != want || res.Consumed != want*subs {
				t.Fatalf("published %d consumed %d verify %+v; want %d each", res.Published, res.Consumed, res.Verify, want)
			}
			if res.LatencyUS.Count != want*subs || res.LatencyUS.P50 <= 0 || res.LatencyUS.P99 < res.LatencyUS.P50 {
				t.Fatalf("latency %+v", res.LatencyUS)
			}
			// The wire client times every confirm; the SDK client and plain
			// mode (no confirms) report none.
			wantConfirms := cfg.Client == "wire" && cfg.Mode == "durable" && cfg.Confirm
			if c := res.ConfirmUS; wantConfirms != (c != nil) ||
				c != nil && (c.Count != res.Published || c.P50 <= 0 || c.P99 < c.P50 || c.Max < c.P99) {
				t.Fatalf("confirm latency %+v (want one per publish: %v)", c, wantConfirms)
			}
			if res.PubRate <= 0 || res.ConRate <= 0 || res.RSSKiB <= 0 {
				t.Fatalf("rates %.0f/%.0f rss %d", res.PubRate, res.ConRate, res.RSSKiB)
			}
			// A run this short may see too few clock ticks for a CPU share
			// (minShareTicks); when there is one it must add up.
			if c := res.CPU; c != nil && (c.User+c.System+c.IRQ+c.IOWait+c.Idle <= 0 || c.Steal < 0 ||
				math.Abs(c.User+c.System+c.Idle+c.IOWait+c.IRQ+c.Steal-100) > 0.5) {
				t.Fatalf("machine CPU %+v", res.CPU)
			}
		})
	}
}

// TestWarmupLeavesEarlyMessagesOutOfLatency: with --warmup the messages
// sent in the warm-up are verified and counted but stay out of both
// latency histograms (the same messages: the cut is by send time).
func TestWarmupLeavesEarlyMessagesOutOfLatency(t *testing.T) {
	cfg := tinyConfig()
	cfg.Rate, cfg.Msgs, cfg.Warmup = 10000, 3000, 100*time.Millisecond // 0.3 s, a third of it warm-up
	res, err := runBench(context.Background(), cfg, nil)
	if err != nil {
		t.Fatalf("runBench: %v", err)
	}
	if !res.Verify.OK || res.Published != 3000 || res.Consumed != 3000 {
		t.Fatalf("published %d consumed %d verify %+v", res.Published, res.Consumed, res.Verify)
	}
	l, c := res.LatencyUS, res.ConfirmUS
	if res.WarmupSamples < 500 || res.WarmupSamples > 2000 || l.Count+uint64(res.WarmupSamples) != 3000 || res.WarmupSeconds != 0.1 {
		t.Fatalf("warm-up %.2f s left out %d of 3000, latency has %d", res.WarmupSeconds, res.WarmupSamples, l.Count)
	}
	if c == nil || c.Count != l.Count {
		t.Fatalf("confirm latency %+v, want the %d messages sent after the warm-up", c, l.Count)
	}
	if a := res.WholeRunUS; a == nil || a.Count != 3000 || a.Max < l.Max {
		t.Fatalf("whole-run latency %+v, want all 3000 deliveries (max >= %v)", a, l.Max)
	}
}

func TestDroppedMessageFailsVerification(t *testing.T) {
	for _, mode := range []string{"durable", "plain"} {
		t.Run(mode, func(t *testing.T) {
			cfg := tinyConfig()
			cfg.Mode = mode
			cfg.dropNth = 1234
			cfg.Msgs = 2000
			// The dropped message never counts, so the run cannot complete:
			// the stall detector must end it rather than the timeout.
			res, err := runBench(context.Background(), cfg, nil)
			if !errors.Is(err, errIncomplete) {
				t.Fatalf("a run with a dropped message gave %v, want errIncomplete", err)
			}
			if res == nil || res.Verify.OK || res.Verify.Missing != 1 {
				t.Fatalf("verify %+v, want exactly 1 missing", res.Verify)
			}
			if !strings.Contains(res.Verify.Summary, "never arrived") {
				t.Fatalf("summary %q does not name the missing message", res.Verify.Summary)
			}
		})
	}
}

func TestDuplicateAndCorruptDeliveriesFail(t *testing.T) {
	tr := NewTracker(2, 32, 10)
	p := template(32)
	stamp(p, msgID(1, 3), 42)
	if sent, fresh := tr.Record(p, 1, nil); !fresh || sent != 42 {
		t.Fatalf("first delivery: fresh %v sent %d", fresh, sent)
	}
	if _, fresh := tr.Record(p, 2, nil); fresh || tr.redeliv.Load() != 1 || tr.dups.Load() != 0 {
		t.Fatal("a redelivery (attempt 2) must count as redelivered, not duplicate")
	}
	if _, fresh := tr.Record(p, 0, func() int { return 1 }); fresh || tr.dups.Load() != 1 {
		t.Fatal("a second delivery with attempt 1 must count as a duplicate")
	}
	bad := bytes.Clone(p)
	bad[20] ^= 1
	if _, fresh := tr.Record(bad, 1, nil); fresh || tr.corrupt.Load() != 2 {
		t.Fatalf("damaged content accepted (corrupt %d)", tr.corrupt.Load())
	}
	if _, fresh := tr.Record(p[:10], 1, nil); fresh {
		t.Fatal("short payload accepted")
	}
	stamp(p, msgID(7, 0), 1)
	if _, fresh := tr.Record(p, 1, nil); fresh {
		t.Fatal("unknown publisher accepted")
	}
	// Growth beyond the initial bitmap.
	stamp(p, msgID(0, 5000), 1)
	if _, fresh := tr.Record(p, 1, nil); !fresh {
		t.Fatal("sequence past the initial size refused")
	}
	if m, first := tr.Missing(1, 5); m != 4 || first != 0 {
		t.Fatalf("missing %d first %d, want 4 and 0", m, first)
	}
}

func TestHistogramQuantiles(t *testing.T) {
	h := &Histogram{}
	var vals []int64
	for i := int64(1); i <= 100000; i++ {
		v := i * i % 9_999_991 // spread over several powers of two
		vals = append(vals, v)
		h.Add(v)
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := float64(vals[int(q*float64(len(vals)-1))])
		got := float64(h.Quantile(q))
		if got > exact || got < exact*(1-1.0/32) {
			t.Errorf("q%.3f = %.0f, exact %.0f (want within 3.2%% below)", q, got, exact)
		}
	}
	if h.Quantile(1) != time.Duration(vals[len(vals)-1]) {
		t.Errorf("max %v, want %d", h.Quantile(1), vals[len(vals)-1])
	}
	for v := int64(0); v < 1<<20; v = v*3/2 + 1 {
		if lo := lowOf(bucketOf(v)); lo > v || float64(lo) < float64(v)*(1-1.0/32) {
			t.Fatalf("value %d in bucket starting at %d", v, lo)
		}
	}
}

func TestAckLinesStayUnderTheLimit(t *testing.T) {
	for _, per := range []int{1, 1 << 30} {
		a := ackLines{per: per}
		var want []string
		for i := range 1000 {
			h := "$F.1.1.0." + strings.Repeat("9", i%15+1) + ".1"
			want = append(want, h)
			a.add([]byte(h))
		}
		b, n := a.take()
		lines := strings.Split(strings.TrimSuffix(string(b), "\r\n"), "\r\n")
		if len(lines) != n {
			t.Fatalf("per %d: %d lines, reported %d", per, len(lines), n)
		}
		var got []string
		for _, l := range lines {
			if len(l) > maxAckLine || !strings.HasPrefix(l, "ACK ") {
				t.Fatalf("bad line (%d bytes): %.40q", len(l), l)
			}
			got = append(got, strings.Fields(l)[1:]...)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("per %d: handles changed on the way", per)
		}
		if per == 1 && n != 1000 {
			t.Fatalf("ack each: %d lines", n)
		}
	}
}

func TestAttemptOf(t *testing.T) {
	for in, want := range map[string]int{"$F.1.2.0.17.1": 1, "$F.1.2.0.17.12": 12, "x": 1, "$F.1.2.0.17.": 1, "": 1} {
		if got := attemptOf([]byte(in)); got != want {
			t.Errorf("attemptOf(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--system", "kafka"}, {"--size", "8"}, {"--pubs", "0"}, {"--ack", "never"},
		{"--mode", "plain", "--backlog"}, {"--cpuprofile", "x"}, {"--trace", "x"}, {"--server-pid", "1"},
		{"--durability", "maybe"}, {"--client", "sdk", "--mode", "plain"}, {"--client", "rest"}, {"stray"}, {"--embed", "--system", "nats"},
		{"--poll-depth", "0"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
	}
}

// TestStartsFibrilServe builds cmd/fibril and lets the tool start it as a
// child process (the path compare.sh uses), with --json output.
func TestStartsFibrilServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/fibril")
	}
	bin := filepath.Join(t.TempDir(), "fibril")
	build := exec.Command("go", "build", "-o", bin, "../fibril")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var out, errb bytes.Buffer
	code := run([]string{"--fibril-bin", bin, "--msgs", "2000", "--pubs", "2", "--subs", "2",
		"--partitions", "2", "--json", "--progress", "0"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{`"ok":true`, `"published":2000`, `"consumed":2000`, `"server_rss_hwm_kib":`, `"server_cpu_s":`} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("JSON lacks %s: %s", want, out.String())
		}
	}
	if strings.Contains(out.String(), `"server_rss_hwm_kib":0`) {
		t.Fatalf("no RSS read from the child: %s", out.String())
	}
	// The server's own fsync histogram, scraped from its admin listener:
	// a durable run fsyncs at least once per partition.
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if f := res.ServerFsyncs; f == nil || f.Count < 2 || f.Seconds <= 0 || f.MaxBelowS <= 0 {
		t.Fatalf("server fsyncs %+v", res.ServerFsyncs)
	}
	// and its stage accounting: every publish stage sampled
	st := res.ServerStages
	if st == nil {
		t.Fatalf("no server stages: %s", res.ServerStagesError)
	}
	seen := map[string]uint64{}
	for _, f := range st.Stages {
		seen[f.Stage] = f.Count
	}
	for _, s := range []string{"parsed", "appended", "fsync_end", "confirm_written", "delivery_written", "ack_durable"} {
		if seen[s] == 0 {
			t.Fatalf("stage %s not sampled: %+v", s, st.Stages)
		}
	}
}

// TestNATSSide runs the NATS driver when nats-server is installed.
func TestNATSSide(t *testing.T) {
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		home, _ := os.UserHomeDir()
		bin = filepath.Join(home, "go", "bin", "nats-server")
		if _, err := os.Stat(bin); err != nil {
			t.Skip("nats-server not installed (bench/compare.sh installs it)")
		}
	}
	for _, mode := range []string{"durable", "plain"} {
		cfg := defaultConfig()
		cfg.System, cfg.Mode, cfg.NatsBin, cfg.Msgs, cfg.Progress = "nats", mode, bin, 2000, 0
		cfg.Pubs, cfg.Subs = 2, 2
		cfg.Timeout, cfg.Stall = 45*time.Second, 2*time.Second
		res, err := runBench(context.Background(), cfg, nil)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if !res.Verify.OK || res.RSSKiB <= 0 {
			t.Fatalf("%s: verify %+v rss %d", mode, res.Verify, res.RSSKiB)
		}
		// Durable: every publish ack timed (acks of one connection come in
		// order); plain: no acks.
		if c := res.ConfirmUS; (mode == "durable") != (c != nil) || c != nil && (c.Count != res.Published || c.P50 <= 0) {
			t.Fatalf("%s: publish ack latency %+v for %d published", mode, c, res.Published)
		}
		cfg.dropNth = 100
		if _, err := runBench(context.Background(), cfg, nil); !errors.Is(err, errIncomplete) {
			t.Fatalf("%s: dropped message not detected: %v", mode, err)
		}
	}
}
