package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// driver speaks one system's protocol. setup runs once before the clients
// start; publish and consume run once per publisher and consumer, each on its
// own connection, and return when done (publish) or when ctx ends (consume).
type driver interface {
	setup(ctx context.Context) error
	// publish sends n messages (n < 0: until st.pubOver()), waits for
	// their confirms and reports what it sent.
	publish(ctx context.Context, idx int, n int64, st *runState) (pubStats, error)
	// consume delivers into st until ctx ends. It calls ready once its
	// subscription is in place.
	consume(ctx context.Context, idx int, st *runState, ready func()) error
	// settled reports whether the durable group has nothing pending and
	// nothing in flight (every message acked and the acks applied).
	settled(ctx context.Context) (bool, error)
	// placement says which nodes a cluster run's clients use (nil on one
	// node); it is set by setup.
	placement() *ClusterStats
	close()
}

// pubStats is what one publisher did.
type pubStats struct {
	sent       uint64 // distinct messages published (confirmed when confirms are on)
	errors     uint64 // publishes refused for good
	retries    uint64 // publishes refused with a retriable error and sent again
	firstErr   string
	start, end time.Time
}

// runState is shared by every client of a run.
type runState struct {
	cfg       *Config
	trackers  []*Tracker   // durable: one shared; plain: one per consumer (each gets everything)
	published atomic.Int64 // frames confirmed (or written, without confirms)
	target    atomic.Int64 // distinct deliveries each tracker must reach
	delivered atomic.Int64 // deliveries handled, all consumers
	drops     atomic.Int64 // test hook counter
	lastRecv  atomic.Int64 // Unix nanos of the delivery that completed the run
	doneOnce  sync.Once
	done      chan struct{}
	hists     []*Histogram // one per consumer
	wholeRun  []*Histogram // one per consumer, with --warmup: every delivery, warm-up included
	confirms  []*Histogram // one per publisher: publish -> confirm (drivers that measure it)
	lats      []*latLog    // one per consumer, with --latency-log
	pubUntil  time.Time    // --duration: publishers stop sending at this time
	// measureFrom (Unix nanos): --warmup; messages sent before it are left
	// out of the latency percentiles (they are still verified and counted).
	measureFrom atomic.Int64
	warmedUp    atomic.Int64 // first deliveries left out
	// ackErrs counts ACK lines the server refused (Fibril wire client),
	// firstAckErr is the first refusal's text.
	ackErrs     atomic.Int64
	firstAckErr atomic.Pointer[string]
	// ackRetries and pollRetries count ACK lines and POLLs refused with a
	// retriable error and sent again.
	ackRetries, pollRetries atomic.Int64
}

// ackRefused records an ACK answered -ERR.
func (st *runState) ackRefused(text string) {
	st.ackErrs.Add(1)
	st.firstAckErr.CompareAndSwap(nil, &text)
}

// measured reports whether a message sent at sent (Unix nanos) counts in
// the latency percentiles.
func (st *runState) measured(sent int64) bool { return sent >= st.measureFrom.Load() }

// pubOver reports whether a --duration run's publishing time is over.
func (st *runState) pubOver() bool { return time.Now().After(st.pubUntil) }

func newRunState(cfg *Config) *runState {
	st := &runState{cfg: cfg, done: make(chan struct{})}
	per := uint64(cfg.Msgs)/uint64(cfg.Pubs) + 1
	if cfg.Duration > 0 {
		per = 1 << 16
	}
	nt := 1
	if cfg.Mode == "plain" {
		nt = cfg.Subs
	}
	for range nt {
		st.trackers = append(st.trackers, NewTracker(cfg.Pubs, cfg.Size, per))
	}
	for range cfg.Pubs {
		st.confirms = append(st.confirms, &Histogram{})
	}
	for range cfg.Subs {
		st.hists = append(st.hists, &Histogram{})
		if cfg.Warmup > 0 {
			st.wholeRun = append(st.wholeRun, &Histogram{})
		}
		if cfg.LatencyLog != "" {
			expect := cfg.Msgs / int64(cfg.Subs)
			if cfg.Mode == "plain" {
				expect = cfg.Msgs // every subscriber gets everything
			}
			if cfg.Duration > 0 {
				expect = 0 // unknown: chunks as they fill
			}
			st.lats = append(st.lats, newLatLog(len(st.lats), expect+latChunk))
		}
	}
	if cfg.Duration > 0 {
		st.target.Store(1<<62 - 1)
	} else {
		st.target.Store(cfg.Msgs)
	}
	return st
}

// deliver handles one delivery to consumer idx: verification, latency, the
// completion check. attempt is the delivery count (0: unknown; lookup is
// called only for a duplicate). It reports whether the run is complete.
func (st *runState) deliver(idx int, payload []byte, attempt int, lookup func() int) bool {
	n := st.delivered.Add(1)
	if st.cfg.dropNth > 0 && n == st.cfg.dropNth {
		st.drops.Add(1)
		return false
	}
	t := st.trackers[idx%len(st.trackers)]
	sent, fresh := t.Record(payload, attempt, lookup)
	if !fresh {
		return false
	}
	now := time.Now().UnixNano()
	if st.measured(sent) {
		st.hists[idx].Add(now - sent)
	} else {
		st.warmedUp.Add(1)
	}
	if st.wholeRun != nil {
		st.wholeRun[idx].Add(now - sent)
	}
	if st.lats != nil {
		st.lats[idx].add(sent, now-sent)
	}
	return st.checkDone(now)
}

// checkDone closes done once every tracker reached the target.
func (st *runState) checkDone(now int64) bool {
	target := st.target.Load()
	for _, t := range st.trackers {
		if t.Unique() < target {
			return false
		}
	}
	st.doneOnce.Do(func() {
		st.lastRecv.Store(now)
		close(st.done)
	})
	return true
}

// isDone reports whether the run is complete.
func (st *runState) isDone() bool {
	select {
	case <-st.done:
		return true
	default:
		return false
	}
}

// errIncomplete is returned when a run ends with messages missing, doubled
// or damaged.
var errIncomplete = errors.New("verification failed")

// runBench runs one benchmark and returns its result. The error is non-nil
// when the run could not be carried out or the verification failed (then the
// result is still filled in as far as it got).
func runBench(ctx context.Context, cfg Config, progress io.Writer) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	res := &Result{Config: cfg}

	srv, err := startServer(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	res.Server = srv.describe()

	var d driver
	switch cfg.System {
	case "fibril":
		d = &fibrilDriver{cfg: &cfg, addr: srv.addr}
		if cfg.Client == "sdk" {
			d = &sdkDriver{d.(*fibrilDriver)}
		}
	default:
		d = &natsDriver{cfg: &cfg, url: srv.url()}
	}
	defer d.close()
	if err := d.setup(ctx); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	if p := d.placement(); p != nil {
		res.Cluster = p
		srv.httpURL = p.leaderHTTP
	}

	st := newRunState(&cfg)
	memPeaks := startMemSampler(srv.pid)
	cpuStart, cpuOK := readCPUTimes()
	stopProgress := startProgress(progress, &cfg, st)
	defer stopProgress()

	conCtx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	var conWG sync.WaitGroup
	conErrs := make(chan error, cfg.Subs)
	var conStart time.Time
	startConsumers := func() error {
		var ready sync.WaitGroup
		ready.Add(cfg.Subs)
		conStart = time.Now()
		for i := range cfg.Subs {
			conWG.Add(1)
			go func() {
				defer conWG.Done()
				once := sync.OnceFunc(ready.Done)
				err := d.consume(conCtx, i, st, once)
				once()
				if err != nil && conCtx.Err() == nil {
					conErrs <- fmt.Errorf("consumer %d: %w", i, err)
					cancel()
				}
			}()
		}
		ready.Wait()
		if ctx.Err() != nil {
			return firstErr(conErrs, ctx.Err())
		}
		return nil
	}

	if !cfg.Backlog {
		if err := startConsumers(); err != nil {
			return res, err
		}
	}

	// Publishers.
	stats := make([]pubStats, cfg.Pubs)
	pubCtx, stopPub := context.WithCancel(ctx)
	defer stopPub()
	var pubWG sync.WaitGroup
	pubErrs := make(chan error, cfg.Pubs)
	pubStart := time.Now()
	st.pubUntil = pubStart.Add(cfg.Duration)
	if cfg.Warmup > 0 {
		st.measureFrom.Store(pubStart.Add(cfg.Warmup).UnixNano())
	}
	for i := range cfg.Pubs {
		n := cfg.Msgs / int64(cfg.Pubs)
		if int64(i) < cfg.Msgs%int64(cfg.Pubs) {
			n++
		}
		if cfg.Duration > 0 {
			n = -1
		}
		pubWG.Add(1)
		go func() {
			defer pubWG.Done()
			s, err := d.publish(pubCtx, i, n, st)
			stats[i] = s
			if err != nil {
				pubErrs <- fmt.Errorf("publisher %d: %w", i, err)
				cancel()
			}
		}()
	}
	pubWG.Wait()
	pubEnd := time.Now()
	if err := firstErr(pubErrs, nil); err != nil {
		// A consumer failure cancels everything: report the cause.
		err = firstErr(conErrs, err)
		stopConsumers()
		conWG.Wait()
		return res, err
	}
	var sent uint64
	for _, s := range stats {
		sent += s.sent
		res.PubErrors += s.errors
		res.PubRetries += s.retries
		if res.FirstError == "" {
			res.FirstError = s.firstErr
		}
	}
	res.Published = sent
	res.PubSeconds = pubEnd.Sub(pubStart).Seconds()
	st.target.Store(int64(sent))
	st.checkDone(time.Now().UnixNano())

	if cfg.Backlog {
		res.RSSBacklogKiB = srv.rssKiB() // peak so far: the whole backlog stored, nothing consumed
		if err := startConsumers(); err != nil {
			return res, err
		}
	}

	// Wait for the consumers, failing on stalls.
	var waitErr error
	last, lastChange := st.delivered.Load(), time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	for waitErr == nil && !st.isDone() {
		select {
		case <-st.done:
		case <-ctx.Done():
			waitErr = firstErr(conErrs, fmt.Errorf("timed out after %s: %w", cfg.Timeout, ctx.Err()))
		case <-tick.C:
			if n := st.delivered.Load(); n != last {
				last, lastChange = n, time.Now()
			} else if time.Since(lastChange) > cfg.Stall {
				waitErr = fmt.Errorf("stalled: no delivery for %s", cfg.Stall)
			}
		}
	}
	tick.Stop()
	end := time.Now()
	if st.isDone() {
		end = time.Unix(0, st.lastRecv.Load())
	}
	// With the consumers still connected (closing would hand their leases
	// back), wait until the server applied every ack.
	var settledAt time.Time
	if waitErr == nil && cfg.Mode == "durable" {
		deadline := time.Now().Add(cfg.Stall)
		for {
			ok, err := d.settled(ctx)
			if err != nil {
				waitErr = fmt.Errorf("checking that every ack was applied: %w", err)
				break
			}
			if ok {
				settledAt = time.Now()
				break
			}
			if time.Now().After(deadline) {
				waitErr = fmt.Errorf("%w: messages still pending or unacked %s after the last delivery", errIncomplete, cfg.Stall)
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if p := d.placement(); p != nil && p.atEnd != nil {
		p.atEnd(ctx)
	}
	stopConsumers()
	conWG.Wait()
	stopProgress()
	res.RSSKiB = srv.rssKiB()
	if srv.started && !srv.embed {
		res.ServerCPUSeconds, _ = procCPUSeconds(srv.pid)
	}
	res.RSSAnonKiB, res.RSSFileKiB = memPeaks()
	if srv.httpURL != "" {
		res.ServerFsyncs, res.ServerFsyncsError = serverFsyncs(ctx, srv.httpURL)
		res.ServerStages, res.ServerStagesError = serverStages(ctx, srv.httpURL)
	}
	if cpuEnd, ok := readCPUTimes(); ok && cpuOK {
		if share, ok := cpuEnd.share(cpuStart); ok {
			res.CPU = &share
		}
	}

	// Figures.
	res.Consumed = uint64(st.trackers[0].Unique())
	for _, t := range st.trackers[1:] {
		res.Consumed += uint64(t.Unique())
	}
	res.Deliveries = uint64(st.delivered.Load())
	res.AckErrors = st.ackErrs.Load()
	res.AckRetries, res.PollRetries = st.ackRetries.Load(), st.pollRetries.Load()
	if e := st.firstAckErr.Load(); e != nil {
		res.FirstAckError = *e
	}
	from := pubStart
	if cfg.Backlog {
		from = conStart
	}
	res.ConSeconds = end.Sub(from).Seconds()
	if !settledAt.IsZero() {
		res.AckedSeconds = settledAt.Sub(from).Seconds()
	}
	res.computeRates(cfg.Size)
	h := &Histogram{}
	for _, x := range st.hists {
		h.Merge(x)
	}
	res.setLatency(h)
	if cfg.Warmup > 0 {
		res.WarmupSeconds, res.WarmupSamples = cfg.Warmup.Seconds(), st.warmedUp.Load()
		w := &Histogram{}
		for _, x := range st.wholeRun {
			w.Merge(x)
		}
		l := percentiles(w)
		res.WholeRunUS = &l
	}
	c := &Histogram{}
	for _, x := range st.confirms {
		c.Merge(x)
	}
	res.setConfirmLatency(c)
	res.verify(st, stats)
	if cfg.LatencyLog != "" {
		if err := writeLatencyLog(cfg.LatencyLog, st.lats); err != nil {
			return res, err
		}
	}
	if cfg.CPUProfile != "" || cfg.MemProfile != "" || cfg.Trace != "" {
		srv.profileDone()
	}
	if waitErr != nil && res.Verify.OK {
		return res, waitErr
	}
	if waitErr != nil {
		return res, fmt.Errorf("%w: %s (%v)", errIncomplete, res.Verify.Summary, waitErr)
	}
	if !res.Verify.OK {
		return res, fmt.Errorf("%w: %s", errIncomplete, res.Verify.Summary)
	}
	return res, nil
}

// firstErr returns the first error queued in ch, else def.
func firstErr(ch chan error, def error) error {
	select {
	case err := <-ch:
		return err
	default:
		return def
	}
}
