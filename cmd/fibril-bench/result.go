package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Result is the outcome of one run; --json prints it as is.
type Result struct {
	Config Config     `json:"config"`
	Server ServerDesc `json:"server"`

	Published  uint64  `json:"published"`
	PubSeconds float64 `json:"pub_seconds"`
	PubRate    float64 `json:"pub_msgs_per_sec"`
	PubMiB     float64 `json:"pub_mib_per_sec"`
	PubErrors  uint64  `json:"pub_errors"`
	PubRetries uint64  `json:"pub_retries"`
	FirstError string  `json:"first_error,omitempty"`

	// Consumed counts distinct messages received (per consumer summed in
	// plain mode, where every consumer gets every message); Deliveries
	// counts every delivery, redeliveries included.
	Consumed   uint64 `json:"consumed"`
	Deliveries uint64 `json:"deliveries"`
	// AckErrors counts ACK lines answered -ERR (Fibril wire client; the
	// settled check then fails), FirstAckError is the first one's text.
	AckErrors     int64  `json:"ack_errors,omitempty"`
	FirstAckError string `json:"first_ack_error,omitempty"`
	// AckRetries and PollRetries count ACK lines and POLLs answered with a
	// retriable -ERR and sent again.
	AckRetries  int64 `json:"ack_retries,omitempty"`
	PollRetries int64 `json:"poll_retries,omitempty"`
	// ConSeconds: concurrent runs: first publish → last message received
	// (end to end); backlog runs: consumers start → last message received.
	ConSeconds float64 `json:"con_seconds"`
	ConRate    float64 `json:"con_msgs_per_sec"`
	ConMiB     float64 `json:"con_mib_per_sec"`

	// AckedSeconds: from the same start until the server reported the
	// group empty (nothing pending, nothing in flight): every ack applied.
	// It is measured by polling (every 2 ms), so it is a little late.
	AckedSeconds float64 `json:"acked_seconds,omitempty"`
	AckedRate    float64 `json:"acked_msgs_per_sec,omitempty"`

	LatencyUS Latency `json:"latency_us"`
	// WarmupSeconds, WarmupSamples: with --warmup, the first deliveries of
	// messages sent in the warm-up, left out of LatencyUS and ConfirmUS.
	WarmupSeconds float64  `json:"warmup_s,omitempty"`
	WarmupSamples int64    `json:"warmup_samples,omitempty"`
	WholeRunUS    *Latency `json:"latency_whole_run_us,omitempty"` // with --warmup: publish -> delivery of every message
	// ConfirmUS: publish written -> its confirm read by the publisher
	// (Fibril's wire client; NATS JetStream's publish ack, when the acks
	// came in order; absent for the Go SDK client and without confirms).
	ConfirmUS *Latency `json:"confirm_latency_us,omitempty"`

	RSSKiB int64 `json:"server_rss_hwm_kib"`
	// ServerCPUSeconds is a started server's user+system CPU time over
	// its life until the end of the run (start and setup included).
	ServerCPUSeconds float64 `json:"server_cpu_s,omitempty"`
	RSSBacklogKiB    int64   `json:"server_rss_hwm_backlog_kib,omitempty"`
	// RSSAnonKiB and RSSFileKiB are the peaks of RssAnon (heap, stacks) and
	// RssFile (mapped files: the segment log's page cache) sampled every
	// 100 ms; VmHWM counts both.
	RSSAnonKiB int64 `json:"server_rss_anon_peak_kib,omitempty"`
	RSSFileKiB int64 `json:"server_rss_file_peak_kib,omitempty"`

	// CPU is how the whole machine's CPU time was spent from the start of
	// the clients to the end of the run (omitted without /proc/stat, and for
	// a run too short to tell: fewer than minShareTicks clock ticks).
	CPU *CPUShare `json:"machine_cpu,omitempty"`

	// ServerFsyncs is a started Fibril server's fsync histogram at the end
	// of the run (fsyncstats.go).
	ServerFsyncs *FsyncStats `json:"server_fsyncs,omitempty"`
	// ServerFsyncsError says why ServerFsyncs is missing for a started
	// Fibril server (its /metrics could not be read).
	ServerFsyncsError string `json:"server_fsyncs_error,omitempty"`
	// ServerStages is a started Fibril server's stage accounting at the
	// end (stagestats.go); ServerStagesError says why it is missing.
	ServerStages      *StageStats `json:"server_stages,omitempty"`
	ServerStagesError string      `json:"server_stages_error,omitempty"`

	// Cluster says where a run against a cluster's clients connected
	// and where the leaders were (cluster.go).
	Cluster *ClusterStats `json:"cluster,omitempty"`

	Verify Verification `json:"verify"`
}

// Latency holds end-to-end latency percentiles in microseconds (publish
// time stamped in the payload → delivery handled by the consumer).
type Latency struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

// Verification is the end-of-run check.
type Verification struct {
	OK          bool   `json:"ok"`
	Missing     uint64 `json:"missing"`
	Duplicates  int64  `json:"duplicates"`
	Redelivered int64  `json:"redelivered"`
	Corrupt     int64  `json:"corrupt"`
	Summary     string `json:"summary"`
}

func (r *Result) computeRates(size int) {
	mib := float64(size) / (1 << 20)
	if r.PubSeconds > 0 {
		r.PubRate = float64(r.Published) / r.PubSeconds
		r.PubMiB = r.PubRate * mib
	}
	if r.ConSeconds > 0 {
		r.ConRate = float64(r.Consumed) / r.ConSeconds
		r.ConMiB = r.ConRate * mib
	}
	if r.AckedSeconds > 0 {
		r.AckedRate = float64(r.Consumed) / r.AckedSeconds
	}
}

func (r *Result) setLatency(h *Histogram) { r.LatencyUS = percentiles(h) }

// setConfirmLatency sets ConfirmUS when h holds any confirm.
func (r *Result) setConfirmLatency(h *Histogram) {
	if h.Count() > 0 {
		l := percentiles(h)
		r.ConfirmUS = &l
	}
}

func percentiles(h *Histogram) Latency {
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	return Latency{Count: h.Count(), P50: us(h.Quantile(0.5)), P99: us(h.Quantile(0.99)),
		P999: us(h.Quantile(0.999)), Max: us(h.Quantile(1))}
}

func (r *Result) verify(st *runState, stats []pubStats) {
	v := &r.Verify
	var problems []string
	for _, t := range st.trackers {
		for i, s := range stats {
			m, first := t.Missing(i, s.sent)
			if m > 0 && v.Missing == 0 {
				problems = append(problems, fmt.Sprintf("publisher %d: message seq %d never arrived", i, first))
			}
			v.Missing += m
		}
		v.Duplicates += t.dups.Load()
		v.Redelivered += t.redeliv.Load()
		v.Corrupt += t.corrupt.Load()
		if e := t.firstErr.Load(); e != nil && len(problems) < 3 {
			problems = append(problems, *e)
		}
	}
	if r.PubErrors > 0 {
		problems = append(problems, fmt.Sprintf("%d publishes refused: %s", r.PubErrors, r.FirstError))
	}
	v.OK = v.Missing == 0 && v.Duplicates == 0 && v.Corrupt == 0 && r.PubErrors == 0 && r.Published > 0
	if r.Published == 0 {
		problems = append(problems, "nothing was published")
	}
	if v.OK {
		v.Summary = fmt.Sprintf("all %d messages arrived intact, none twice", r.Published)
		if len(st.trackers) > 1 {
			v.Summary += fmt.Sprintf(" (at each of %d subscribers)", len(st.trackers))
		}
		return
	}
	v.Summary = fmt.Sprintf("missing %d, duplicates %d, corrupt %d, publish errors %d; %s",
		v.Missing, v.Duplicates, v.Corrupt, r.PubErrors, strings.Join(problems, "; "))
}

// writeText prints the result for people.
func (r *Result) writeText(w io.Writer) {
	c := &r.Config
	fmt.Fprintf(w, "system    %s (%s)  mode %s  pubs %d  subs %d  size %d B  partitions %d\n",
		c.System, r.Server.Version, c.Mode, c.Pubs, c.Subs, c.Size, c.Partitions)
	if c.System == "fibril" {
		fmt.Fprintf(w, "          client %s  durability %s  confirm %v (window %d)  crc %v  consume %s (batch %d, credit %d)  ack %s  backlog %v\n",
			c.Client, c.Durability, c.Confirm, c.Window, c.CRC, c.Consume, c.Batch, c.Credit, c.Ack, c.Backlog)
	} else {
		fmt.Fprintf(w, "          sync_interval always %v  confirm %v (window %d)  consume %s (batch %d)  backlog %v\n",
			c.NatsSyncAlways, c.Confirm, c.Window, c.Consume, c.Batch, c.Backlog)
	}
	fmt.Fprintf(w, "publish   %d msgs in %.3f s: %.0f msgs/s, %.1f MiB/s (errors %d, retried %d)\n",
		r.Published, r.PubSeconds, r.PubRate, r.PubMiB, r.PubErrors, r.PubRetries)
	what := "end to end (first publish -> last delivery)"
	if c.Backlog {
		what = "drain (consumers start -> last delivery)"
	}
	fmt.Fprintf(w, "consume   %d msgs in %.3f s, %s: %.0f msgs/s, %.1f MiB/s (deliveries %d)\n",
		r.Consumed, r.ConSeconds, what, r.ConRate, r.ConMiB, r.Deliveries)
	if r.AckedSeconds > 0 {
		fmt.Fprintf(w, "acked     every ack applied (group empty) after %.3f s: %.0f msgs/s\n", r.AckedSeconds, r.AckedRate)
	}
	l := r.LatencyUS
	fmt.Fprintf(w, "latency   publish->delivery p50 %s  p99 %s  p99.9 %s  max %s (%d samples)\n",
		fmtUS(l.P50), fmtUS(l.P99), fmtUS(l.P999), fmtUS(l.Max), l.Count)
	if a := r.WholeRunUS; a != nil {
		fmt.Fprintf(w, "          (after a warm-up of %.1f s, %d deliveries left out; whole run: p50 %s  p99 %s  p99.9 %s)\n",
			r.WarmupSeconds, r.WarmupSamples, fmtUS(a.P50), fmtUS(a.P99), fmtUS(a.P999))
	}
	if c := r.ConfirmUS; c != nil {
		fmt.Fprintf(w, "          publish->confirm  p50 %s  p99 %s  p99.9 %s  max %s (%d confirms)\n",
			fmtUS(c.P50), fmtUS(c.P99), fmtUS(c.P999), fmtUS(c.Max), c.Count)
	}
	if r.RSSBacklogKiB > 0 {
		fmt.Fprintf(w, "server    peak RSS %.1f MiB with the backlog stored, %.1f MiB over the run (%s)\n",
			float64(r.RSSBacklogKiB)/1024, float64(r.RSSKiB)/1024, r.Server.RSSNote)
	} else if r.RSSKiB > 0 {
		fmt.Fprintf(w, "server    peak RSS %.1f MiB (%s)\n", float64(r.RSSKiB)/1024, r.Server.RSSNote)
	}
	if r.RSSAnonKiB > 0 {
		fmt.Fprintf(w, "          sampled peaks: RssAnon %.1f MiB (heap), RssFile %.1f MiB (mapped files)\n",
			float64(r.RSSAnonKiB)/1024, float64(r.RSSFileKiB)/1024)
	}
	if f := r.ServerFsyncs; f != nil {
		f.writeText(w)
	} else if r.ServerFsyncsError != "" {
		fmt.Fprintf(w, "server    fsyncs unknown: %s\n", r.ServerFsyncsError)
	}
	if s := r.ServerStages; s != nil {
		s.writeText(w)
	} else if r.ServerStagesError != "" {
		fmt.Fprintf(w, "stages    unknown: %s\n", r.ServerStagesError)
	}
	if c := r.CPU; c != nil {
		fmt.Fprintf(w, "machine   CPU over the run: user %.0f%%  system %.0f%%  irq %.0f%%  iowait %.0f%%  idle %.0f%%  steal %.0f%%\n",
			c.User, c.System, c.IRQ, c.IOWait, c.Idle, c.Steal)
	}
	status := "OK"
	if !r.Verify.OK {
		status = "FAILED"
	}
	fmt.Fprintf(w, "verify    %s: %s (redelivered %d)\n", status, r.Verify.Summary, r.Verify.Redelivered)
	if r.AckRetries > 0 || r.PollRetries > 0 {
		fmt.Fprintf(w, "retries   %d ACK lines and %d POLLs refused for a moment (retriable) and sent again\n", r.AckRetries, r.PollRetries)
	}
	if r.AckErrors > 0 {
		fmt.Fprintf(w, "acks      %d ACK lines refused, the first: -ERR '%s'\n", r.AckErrors, r.FirstAckError)
	}
	if c := r.Cluster; c != nil {
		fmt.Fprintf(w, "cluster   leader %s", c.Leader)
		if c.ConsumerLeader != "" {
			fmt.Fprintf(w, " (consumer %s)", c.ConsumerLeader)
		}
		fmt.Fprintf(w, ", publishers on %s, consumers on %s (--target %s), PUBs per node %v, leader moved %v\n",
			c.PubNode, c.ConNode, c.Target, c.InMsgs, c.LeaderMoved)
	}
}

func fmtUS(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.2fs", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.2fms", us/1e3)
	}
	return fmt.Sprintf("%.0fus", us)
}

// report is a result fibril-bench prints: a Result or a DiskResult.
type report interface{ writeText(w io.Writer) }

// printReport writes r as one JSON object on a line (asJSON) or as text.
func printReport(w io.Writer, r report, asJSON bool) error {
	if !asJSON {
		r.writeText(w)
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// startProgress prints a progress line every cfg.Progress until the returned
// function is called (idempotent).
func startProgress(w io.Writer, cfg *Config, st *runState) func() {
	if cfg.Progress <= 0 || w == nil {
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(cfg.Progress)
		defer t.Stop()
		start := time.Now()
		var lp, lc int64
		for {
			select {
			case <-quit:
				return
			case now := <-t.C:
				p, c := st.published.Load(), st.delivered.Load()
				secs := cfg.Progress.Seconds()
				fmt.Fprintf(w, "[%5.1fs] published %d (%.0f/s)  delivered %d (%.0f/s)\n",
					now.Sub(start).Seconds(), p, float64(p-lp)/secs, c, float64(c-lc)/secs)
				lp, lc = p, c
			}
		}
	}()
	return sync.OnceFunc(func() { close(quit); wg.Wait() })
}
