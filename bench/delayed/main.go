// Command delayed measures what delayed messages cost (issue 29): it
// starts `fibril serve` on loopback, measures ordinary traffic alone
// (confirmed publishes and acked consumption on a topic of its own), then
// publishes N messages to a topic with allow_msg_delay, each with a
// Fibril-Deliver-At spread uniformly over -span after -lead, and consumes
// them as they come due, while it measures the ordinary traffic again in
// the middle of the span. It reports:
//
//   - fire error: the time a message reached the consumer minus its due
//     time (p50, p99, max; a message before its due time counts as early);
//   - the server's resident memory (VmRSS, and RssAnon: the heap, without
//     the log's mapped pages) before and once all are held back, per
//     held-back message, and its peak (VmHWM);
//   - ordinary throughput next to them, as a ratio to alone.
//
// It is a benchmark, not a test (`make bench-delayed`); its test runs a
// small form and checks only that nothing is early or missing.
//
//	go run ./bench/delayed -n 1000000 -span 10m
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/conformance/fibrilproc"
	fibril "github.com/fibrilmq/fibril/sdk"
)

func main() {
	var cfg config
	flag.IntVar(&cfg.n, "n", 1_000_000, "delayed messages")
	flag.DurationVar(&cfg.span, "span", 10*time.Minute, "their due times spread over this span")
	flag.DurationVar(&cfg.lead, "lead", 5*time.Second, "the earliest due time after each publish")
	flag.IntVar(&cfg.size, "size", 256, "payload bytes of each delayed message")
	flag.IntVar(&cfg.partitions, "partitions", 4, "partitions of the delayed topic")
	flag.DurationVar(&cfg.ordFor, "ordinary", 10*time.Second, "how long each ordinary-traffic measurement runs")
	flag.StringVar(&cfg.bin, "bin", "", "fibril binary (empty: $FIBRIL_BIN or go build ./cmd/fibril)")
	flag.Parse()
	cfg.out = os.Stdout
	if _, err := run(context.Background(), cfg); err != nil {
		fmt.Fprintln(os.Stderr, "delayed:", err)
		os.Exit(1)
	}
}

// config is one run.
type config struct {
	n, size, partitions int
	span, lead, ordFor  time.Duration
	bin                 string
	out                 io.Writer
}

// result is what a run measured.
type result struct {
	received, early, missing int
	late                     int // more than 100 ms after the due time
	errP50, errP99, errMax   time.Duration
	rssBefore, rssHeld, hwm  int64
	anonBefore, anonHeld     int64   // RssAnon: the heap, not mapped log pages
	ordAlone, ordWith        float64 // ordinary messages consumed per second
	publishRate              float64 // delayed publishes confirmed per second
	fsyncs, fsyncsOver       uint64  // the server's fsyncs, and those over 51.2 ms
}

func run(ctx context.Context, cfg config) (result, error) {
	var res result
	tmp, err := os.MkdirTemp("", "fibril-delayed-bench")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp)
	bin := cfg.bin
	if bin == "" {
		if bin, err = fibrilproc.Build(ctx, tmp); err != nil {
			return res, err
		}
	}
	srv, err := fibrilproc.Start(ctx, bin, filepath.Join(tmp, "data"), "--log-level", "warn", "--http", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	defer srv.Stop(false)
	pid := srv.PID()
	url := "nats://" + srv.Addr
	w := cfg.out
	c, err := fibril.Connect(ctx, url, fibril.WithRequestTimeout(time.Minute))
	if err != nil {
		return res, err
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "ord", fibril.TopicConfig{}); err != nil {
		return res, err
	}
	if _, err := c.CreateGroup(ctx, "ord", "g", fibril.GroupConfig{}); err != nil {
		return res, err
	}
	if _, err := c.CreateTopic(ctx, "dly", fibril.TopicConfig{Partitions: cfg.partitions, AllowMsgDelay: true}); err != nil {
		return res, err
	}
	if _, err := c.CreateGroup(ctx, "dly", "g", fibril.GroupConfig{}); err != nil {
		return res, err
	}
	fmt.Fprintf(w, "server pid %d on %s: %d delayed x %d B over %v (lead %v), %d partitions\n",
		pid, srv.Addr, cfg.n, cfg.size, cfg.span, cfg.lead, cfg.partitions)

	if res.ordAlone, err = ordinary(ctx, url, cfg.ordFor); err != nil {
		return res, fmt.Errorf("ordinary traffic alone: %w", err)
	}
	res.rssBefore, res.anonBefore = procStatus(pid, "VmRSS"), procStatus(pid, "RssAnon")
	fmt.Fprintf(w, "ordinary alone: %.0f msgs/s; server rss %s (anonymous %s)\n", res.ordAlone, mib(res.rssBefore), mib(res.anonBefore))

	fire := newFireLog(cfg.n)
	cctx, stopConsume := context.WithCancel(ctx)
	defer stopConsume()
	consumed := make(chan error, 1)
	go func() { consumed <- consume(cctx, url, fire, cfg.n) }()

	t0 := time.Now()
	if err := publishDelayed(ctx, url, cfg); err != nil {
		return res, fmt.Errorf("delayed publishes: %w", err)
	}
	pubTook := time.Since(t0)
	res.publishRate = float64(cfg.n) / pubTook.Seconds()
	res.rssHeld, res.anonHeld = procStatus(pid, "VmRSS"), procStatus(pid, "RssAnon")
	held := float64(max(1, cfg.n-fire.count()))
	fmt.Fprintf(w, "published %d delayed in %v (%.0f msgs/s); %d fired so far; server rss %s (%.0f B per held-back message over before), anonymous %s (%.0f B per held-back message)\n",
		cfg.n, pubTook.Round(time.Millisecond), res.publishRate, fire.count(), mib(res.rssHeld),
		float64(res.rssHeld-res.rssBefore)/held, mib(res.anonHeld), float64(res.anonHeld-res.anonBefore)/held)

	// Ordinary traffic again, in the middle of the span, while they fire.
	mid := t0.Add(cfg.lead + cfg.span/2 - cfg.ordFor/2)
	select {
	case <-time.After(time.Until(mid)):
	case err := <-consumed:
		return res, fmt.Errorf("consumer stopped early: %w", err)
	}
	firedBefore := fire.count()
	if res.ordWith, err = ordinary(ctx, url, cfg.ordFor); err != nil {
		return res, fmt.Errorf("ordinary traffic beside the delayed: %w", err)
	}
	fmt.Fprintf(w, "ordinary beside them: %.0f msgs/s (%.2fx alone) while %d delayed fired\n",
		res.ordWith, res.ordWith/res.ordAlone, fire.count()-firedBefore)

	// The last is due at most lead+span after the last publish.
	deadline := time.Now().Add(time.Until(t0.Add(pubTook+cfg.lead+cfg.span)) + 60*time.Second)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for fire.count() < cfg.n && time.Now().Before(deadline) {
		select {
		case err := <-consumed:
			if fire.count() < cfg.n {
				return res, fmt.Errorf("consumer stopped with %d of %d: %w", fire.count(), cfg.n, err)
			}
		case <-tick.C:
		}
	}
	stopConsume()
	res.hwm = procStatus(pid, "VmHWM")
	errs, early, dups := fire.summary()
	late := len(errs) - sort.Search(len(errs), func(i int) bool { return errs[i] > 100*time.Millisecond })
	res.received, res.early, res.missing = len(errs), early, cfg.n-len(errs)
	if len(errs) > 0 {
		res.errP50, res.errP99, res.errMax = errs[len(errs)/2], errs[len(errs)*99/100], errs[len(errs)-1]
	}
	res.late = late
	fmt.Fprintf(w, "fired %d of %d (missing %d, early %d, over 100 ms late %d, delivered again %d): error p50 %v p99 %v max %v\n",
		res.received, cfg.n, res.missing, res.early, late, dups, res.errP50, res.errP99, res.errMax)
	fmt.Fprintf(w, "server peak rss (VmHWM) %s\n", mib(res.hwm))
	if n, over, err := fsyncsOver(srv.HTTP, 0.1); err == nil {
		res.fsyncs, res.fsyncsOver = n, over
		fmt.Fprintf(w, "server fsyncs %d, of which over 51.2 ms %d (fibril_fsync_seconds; a due message waits for the fsync of its delivery)\n", n, over)
	} else {
		fmt.Fprintf(w, "server fsyncs: %v\n", err)
	}
	if res.missing > 0 {
		return res, fmt.Errorf("%d delayed messages never came", res.missing)
	}
	return res, nil
}

// publishDelayed publishes cfg.n messages to dly, message i due at its
// publish time plus lead plus a uniform draw from [0, span); its payload
// holds i and the due time (unix ns).
func publishDelayed(ctx context.Context, url string, cfg config) error {
	c, err := fibril.Connect(ctx, url, fibril.WithRequestTimeout(time.Minute))
	if err != nil {
		return err
	}
	defer c.Close()
	rng := rand.New(rand.NewPCG(29, uint64(cfg.n)))
	futs, waited := awaitConfirms(ctx)
	payload := make([]byte, max(16, cfg.size))
	var perr error
	for i := range cfg.n {
		due := time.Now().Add(cfg.lead + time.Duration(rng.Int64N(int64(cfg.span))))
		binary.BigEndian.PutUint64(payload, uint64(i))
		binary.BigEndian.PutUint64(payload[8:], uint64(due.UnixNano()))
		f, err := c.PublishAsync(ctx, "dly", payload, fibril.WithDeliverAt(due))
		if err != nil {
			perr = fmt.Errorf("publish %d: %w", i, err)
			break
		}
		futs <- f
	}
	close(futs)
	if err := <-waited; perr == nil {
		perr = err
	}
	return perr
}

// consume takes dly's messages as they come due, logs each one's fire
// error and acks it, until ctx ends or all n came.
func consume(ctx context.Context, url string, fire *fireLog, n int) error {
	c, err := fibril.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close()
	err = c.Consume(ctx, "dly", "g", func(_ context.Context, m *fibril.Msg) error {
		if len(m.Data) < 16 {
			return fmt.Errorf("payload of %d bytes", len(m.Data))
		}
		fire.add(int(binary.BigEndian.Uint64(m.Data)), int64(binary.BigEndian.Uint64(m.Data[8:])), time.Now().UnixNano())
		return nil
	}, fibril.WithConcurrency(4))
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// ordinary runs confirmed publishes of 1 KiB to ord from one connection
// and acked consumption from another for d, and returns the messages
// consumed per second.
func ordinary(ctx context.Context, url string, d time.Duration) (float64, error) {
	pc, err := fibril.Connect(ctx, url, fibril.WithRequestTimeout(time.Minute))
	if err != nil {
		return 0, err
	}
	defer pc.Close()
	cc, err := fibril.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer cc.Close()
	var got atomic.Int64
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var cerr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		cerr = cc.Consume(cctx, "ord", "g", func(context.Context, *fibril.Msg) error { got.Add(1); return nil })
		if errors.Is(cerr, context.Canceled) {
			cerr = nil
		}
	}()
	payload := make([]byte, 1024)
	futs, waited := awaitConfirms(ctx)
	t0 := time.Now()
	start := got.Load()
	var perr error
	for time.Since(t0) < d {
		f, err := pc.PublishAsync(ctx, "ord", payload)
		if err != nil {
			perr = err
			break
		}
		futs <- f
	}
	close(futs)
	if err := <-waited; perr == nil {
		perr = err
	}
	rate := float64(got.Load()-start) / time.Since(t0).Seconds()
	// Let the consumer take the rest, so the next measurement starts empty.
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if info, err := pc.Group(ctx, "ord", "g"); err == nil && info.Pending == 0 && info.Inflight == 0 {
			break
		}
	}
	cancel()
	wg.Wait()
	if perr == nil {
		perr = cerr
	}
	return rate, perr
}

// awaitConfirms waits for each publish future sent on futs, in order, and
// once futs is closed sends the first failure (or nil) on waited. The
// channel's capacity bounds the publishes in flight beside the SDK's own
// window.
func awaitConfirms(ctx context.Context) (futs chan<- *fibril.PubFuture, waited <-chan error) {
	fc := make(chan *fibril.PubFuture, 4096)
	wc := make(chan error, 1)
	go func() {
		var first error
		for f := range fc {
			if _, err := f.Wait(ctx); err != nil && first == nil {
				first = err
			}
		}
		wc <- first
	}()
	return fc, wc
}

// fireLog records, per delayed message, when it first reached the
// consumer, against its due time.
type fireLog struct {
	mu    sync.Mutex
	errs  []int64 // received - due, ns; index: message number
	seen  []bool
	n     int
	again int
}

func newFireLog(n int) *fireLog {
	return &fireLog{errs: make([]int64, n), seen: make([]bool, n)}
}

func (f *fireLog) add(i int, dueNs, nowNs int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i < 0 || i >= len(f.seen) {
		return
	}
	if f.seen[i] {
		f.again++
		return
	}
	f.seen[i] = true
	f.errs[i] = nowNs - dueNs
	f.n++
}

func (f *fireLog) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// summary returns the fire errors of the messages that came, sorted, how
// many came before their due time, and how many came more than once.
func (f *fireLog) summary() (errs []time.Duration, early, again int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, ok := range f.seen {
		if !ok {
			continue
		}
		if f.errs[i] < 0 {
			early++
		}
		errs = append(errs, time.Duration(f.errs[i]))
	}
	slices.Sort(errs)
	return errs, early, f.again
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// procStatus reads one kB field (VmRSS, RssAnon, VmHWM) of /proc/<pid>/status, in
// bytes (-1 when it cannot).
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb << 10
		}
	}
	return -1
}

// fsyncsOver reads the server's fibril_fsync_seconds histogram from its
// /metrics and returns how many fsyncs it counts and how many took longer
// than the largest bucket bound <= le seconds (51.2 ms for 0.1: the
// buckets double from 50 µs).
func fsyncsOver(httpURL string, le float64) (total, over uint64, err error) {
	if httpURL == "" {
		return 0, 0, errors.New("no admin listener")
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(httpURL + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, 0, err
	}
	var under uint64
	var underLe float64 = -1
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "fibril_fsync_seconds_bucket{le=\""); ok {
			q := strings.Index(rest, `"}`)
			if q < 0 {
				continue
			}
			f := strings.Fields(rest[q+2:])
			if len(f) != 1 {
				continue
			}
			bound, err1 := strconv.ParseFloat(rest[:q], 64)
			n, err2 := strconv.ParseFloat(f[0], 64)
			if err1 == nil && err2 == nil && bound <= le && bound > underLe {
				under, underLe = uint64(n), bound
			}
		} else if rest, ok := strings.CutPrefix(l, "fibril_fsync_seconds_count "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				total = uint64(n)
			}
		}
	}
	if total == 0 {
		return 0, 0, errors.New("no fibril_fsync_seconds on /metrics")
	}
	return total, total - under, nil
}
