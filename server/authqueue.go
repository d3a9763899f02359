package server

// The password-check queue (SPEC.md "Security", cmd/fibril/README.md
// "Limits and protection"). A bcrypt check costs tens to hundreds of
// milliseconds of CPU and anyone who can connect can ask for one, so checks
// never run on an event loop and never without bounds:
//
//   - At most MaxAuthQueue checks wait. They are served in two lanes. A
//     source (client IPv4 address, or IPv6 /64) with no unsuccessful attempt in the last
//     failFor (its check refused, its CONNECT shed or evicted, or its
//     connection gone before its check) is fresh: its first waiting check
//     goes in the fresh lane, served first, in order of arrival. Every
//     other check waits in the main lane, where the source served least
//     recently goes next: sources that keep asking take turns
//     (round-robin). So an attack that guesses passwords, even spread over
//     many addresses (each of them fails, and is then no longer fresh),
//     delays a new address's login by the check being computed, not by
//     the attack. Sources are remembered as failed for failFor, at most
//     maxFailed of them (past that an arbitrary one is forgotten: an
//     attack from more addresses than that makes some of them fresh again,
//     and a new address then waits behind at most MaxAuthQueue checks).
//   - When the queue is full, a fresh source's first check takes the place
//     of the newest check of the main lane's busiest source; a check for
//     the main lane from a source with fewer waiting checks than the
//     busiest source takes the place of that source's newest check;
//     otherwise it is refused. A refused (shed) CONNECT is answered
//     auth_busy (retriable) and its connection closed.
//   - Checks spend at most AuthCPUPercent of the CPUs' time, measured on the
//     checks themselves (a token bucket of CPU time: the worker thread's
//     CPU clock where there is one, checkcpu_linux.go), so logged-in
//     clients keep the rest whatever the rate of CONNECTs.
//   - A check whose connection closed meanwhile (it left, or its auth
//     timeout, which counts from accept and is never suspended, passed) is
//     dropped without being computed.
//   - Sources that logged in successfully in the last trustFor, with no
//     unsuccessful attempt since, are served first, from a lane of their
//     own (bounded like the others): an attack from many addresses does
//     not delay a known client's login.

import (
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// authJob is one password check waiting: a CONNECT's, or an admin HTTP
// request's (passwords.go).
type authJob struct {
	o   protocol.Connect // the credentials (and, for a CONNECT, the rest)
	src string
	// gone reports that the requester left (its connection closed, its
	// HTTP request ended): the check is dropped, never computed.
	gone func() bool
	// started, when set, is called when the check starts being computed
	// (a CONNECT's auth timeout waits for such a check's answer).
	started func()
	done    func(authResult, bool) // bool: false when shed or dropped
}

// authQueue runs password checks for one server. Its workers start with
// the server and stop with stop.
type authQueue struct {
	s *Server

	mu   sync.Mutex
	wake chan struct{} // capacity 1: a job was queued
	// fresh: the fresh lane, FIFO, at most one job per source (inFresh).
	fresh   []*authJob
	inFresh map[string]bool
	// The main lane: jobs per source, and the sources with jobs in order
	// of arrival.
	bySrc map[string][]*authJob
	order []string
	// failed: when each source's last unsuccessful attempt ended (at most
	// maxFailed; see the top of this file).
	failed map[string]time.Time
	// served: when each source's check last started (at most maxServed,
	// the oldest forgotten first); the least recent is served next.
	served  map[string]time.Time
	n       int // jobs queued in the fresh and main lanes
	limit   int
	stopped bool
	// trusted: sources with a successful login, and when (at most
	// maxTrusted, the oldest forgotten first); prio: their jobs, FIFO.
	trusted map[string]time.Time
	prio    []*authJob

	// budget is the CPU time (ns) checks may still spend; it refills at
	// refill ns per second of wall time, up to burst.
	budget   float64
	refill   float64
	burst    float64
	refilled time.Time

	quit chan struct{}
	wg   sync.WaitGroup
}

// Trusted sources: how long a successful login vouches for its address,
// and how many addresses are remembered.
const (
	trustFor   = time.Hour
	maxTrusted = 4096
	maxServed  = 4096
)

// Failed sources: how long an unsuccessful attempt keeps its address out
// of the fresh lane, and how many addresses are remembered.
const (
	failFor   = 10 * time.Minute
	maxFailed = 4096
)

func newAuthQueue(s *Server) *authQueue {
	procs := runtime.GOMAXPROCS(0)
	refill := float64(procs) * float64(s.opts.AuthCPUPercent) / 100 * float64(time.Second)
	q := &authQueue{
		s:       s,
		wake:    make(chan struct{}, 1),
		bySrc:   make(map[string][]*authJob),
		inFresh: make(map[string]bool),
		failed:  make(map[string]time.Time),
		trusted: make(map[string]time.Time),
		served:  make(map[string]time.Time),
		limit:   s.opts.MaxAuthQueue,
		quit:    make(chan struct{}),
		// A burst of half a second of the budget lets a few logins
		// through at once after a quiet time.
		refill:   refill,
		burst:    refill / 2,
		budget:   refill / 2,
		refilled: time.Now(),
	}
	// Enough workers to spend the budget, no more: each worker starts a
	// check only when the budget is not negative, so n workers may
	// overdraw it by n checks.
	workers := max(1, (procs*s.opts.AuthCPUPercent+99)/100)
	for range workers {
		q.wg.Add(1)
		go q.worker()
	}
	return q
}

// stop ends the workers; jobs still queued are dropped (their connections
// are closing with the server).
func (q *authQueue) stop() {
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		return
	}
	q.stopped = true
	q.mu.Unlock()
	close(q.quit)
	q.wg.Wait()
}

// sourceOf is the fairness key of a connection: its IPv4 address, or the
// /64 prefix of its IPv6 address (one host's allocation is a /64, so each
// of its 2^64 addresses would otherwise be a fresh source).
func sourceOf(remote string) string {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() != nil {
		if ip != nil {
			return ip.To4().String() // IPv4-mapped IPv6 too
		}
		return host
	}
	return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
}

// submit queues j. It reports false when j is shed (its lane is full, and
// it may take no other check's place); j.done is then not called, and an
// untrusted source counts as failed. A job it evicts to make room gets
// done(_, false), and the evicted job's source counts as failed.
func (q *authQueue) submit(j *authJob) bool {
	var evicted *authJob
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		return false
	}
	now := time.Now()
	if at, ok := q.trusted[j.src]; ok && now.Sub(at) < trustFor {
		if len(q.prio) >= q.limit {
			q.mu.Unlock()
			q.s.stats.authShed.Add(1)
			return false
		}
		q.prio = append(q.prio, j)
		q.mu.Unlock()
		q.kick()
		return true
	}
	fresh := !q.inFresh[j.src] && !q.failedLocked(j.src, now)
	if q.n >= q.limit {
		q.purgeClosedLocked(now)
	}
	if q.n >= q.limit {
		busiest, most := q.busiestLocked()
		if fresh && most == 0 || !fresh && most < len(q.bySrc[j.src])+2 {
			q.markFailedLocked(j.src, now)
			q.mu.Unlock()
			q.s.stats.authShed.Add(1)
			return false
		}
		js := q.bySrc[busiest]
		evicted = js[len(js)-1]
		js[len(js)-1] = nil
		q.bySrc[busiest] = js[:len(js)-1]
		q.n--
		q.markFailedLocked(busiest, now)
		if len(js) == 1 {
			q.dropEmptyLocked()
		}
	}
	if fresh {
		q.fresh = append(q.fresh, j)
		q.inFresh[j.src] = true
	} else {
		if len(q.bySrc[j.src]) == 0 {
			q.order = append(q.order, j.src)
		}
		q.bySrc[j.src] = append(q.bySrc[j.src], j)
	}
	q.n++
	q.mu.Unlock()
	q.kick()
	if evicted != nil {
		q.s.stats.authShed.Add(1)
		evicted.done(authResult{}, false)
	}
	return true
}

// busiestLocked returns the main lane's source with the most jobs waiting
// and how many (0 when the lane is empty). q.mu held.
func (q *authQueue) busiestLocked() (string, int) {
	busiest, most := "", 0
	for _, src := range q.order {
		if n := len(q.bySrc[src]); n > most {
			busiest, most = src, n
		}
	}
	return busiest, most
}

// failedLocked reports whether src had an unsuccessful attempt in the last
// failFor (q.mu held).
func (q *authQueue) failedLocked(src string, now time.Time) bool {
	at, ok := q.failed[src]
	if ok && now.Sub(at) >= failFor {
		delete(q.failed, src)
		return false
	}
	return ok
}

// markFailedLocked records an unsuccessful attempt from src (q.mu held).
// Past maxFailed sources an arbitrary one is forgotten (the map's order):
// O(1), where finding the oldest would scan them all on every attempt of
// an attack from many addresses.
func (q *authQueue) markFailedLocked(src string, now time.Time) {
	if _, ok := q.failed[src]; !ok && len(q.failed) >= maxFailed {
		for k := range q.failed {
			delete(q.failed, k)
			break
		}
	}
	q.failed[src] = now
}

// ended records how an attempt from src ended: ok when it logged in (the
// source is trusted), else unsuccessful (refused, or dropped uncomputed):
// the source counts as failed and is trusted no more, so an address that
// logged in once cannot then guess passwords from the trusted lane.
func (q *authQueue) ended(src string, ok bool) {
	if ok {
		q.trust(src)
		return
	}
	q.mu.Lock()
	delete(q.trusted, src)
	q.markFailedLocked(src, time.Now())
	q.mu.Unlock()
}

// kick wakes a worker.
func (q *authQueue) kick() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// trust records a successful login from src.
func (q *authQueue) trust(src string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.trusted[src]; !ok && len(q.trusted) >= maxTrusted {
		oldest, at := "", time.Now()
		for k, t := range q.trusted {
			if t.Before(at) {
				oldest, at = k, t
			}
		}
		delete(q.trusted, oldest)
	}
	q.trusted[src] = time.Now()
}

// purgeClosedLocked drops jobs whose connections are closing (q.mu held);
// their sources count as failed.
func (q *authQueue) purgeClosedLocked(now time.Time) {
	keep := func(js []*authJob) []*authJob {
		k := 0
		for _, j := range js {
			if j.gone() {
				q.n--
				q.s.stats.authDropped.Add(1)
				q.markFailedLocked(j.src, now)
				continue
			}
			js[k] = j
			k++
		}
		clear(js[k:])
		return js[:k]
	}
	for src, js := range q.bySrc {
		q.bySrc[src] = keep(js)
	}
	q.dropEmptyLocked()
	q.fresh = keep(q.fresh)
	clear(q.inFresh)
	for _, j := range q.fresh {
		q.inFresh[j.src] = true
	}
}

// dropEmptyLocked removes sources without jobs from the round-robin order.
func (q *authQueue) dropEmptyLocked() {
	k := 0
	for _, src := range q.order {
		if len(q.bySrc[src]) == 0 {
			delete(q.bySrc, src)
			continue
		}
		q.order[k] = src
		k++
	}
	clear(q.order[k:])
	q.order = q.order[:k]
}

// pop takes the next job: a trusted source's first, then the fresh lane's
// first, then the first job of the main lane's source served least
// recently (never served counts as longest ago; ties go to the earliest
// to arrive); nil when none waits.
func (q *authQueue) pop() *authJob {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.prio) > 0 {
		j := q.prio[0]
		q.prio[0] = nil
		q.prio = q.prio[1:]
		return j
	}
	if len(q.fresh) > 0 {
		j := q.fresh[0]
		q.fresh[0] = nil
		q.fresh = q.fresh[1:]
		delete(q.inFresh, j.src)
		q.n--
		q.markServedLocked(j.src)
		return j
	}
	if q.n == 0 {
		return nil
	}
	src := q.order[0]
	last := q.served[src]
	for _, s := range q.order[1:] {
		if t := q.served[s]; t.Before(last) {
			src, last = s, t
		}
	}
	js := q.bySrc[src]
	j := js[0]
	js[0] = nil
	q.bySrc[src] = js[1:]
	q.n--
	if len(js) == 1 {
		q.dropEmptyLocked()
	}
	q.markServedLocked(src)
	return j
}

// markServedLocked records that src's check starts now (q.mu held).
func (q *authQueue) markServedLocked(src string) {
	now := time.Now()
	if _, ok := q.served[src]; !ok && len(q.served) >= maxServed {
		oldest, at := "", now
		for k, t := range q.served {
			if t.Before(at) {
				oldest, at = k, t
			}
		}
		delete(q.served, oldest)
	}
	q.served[src] = now
}

// spend waits until the CPU budget is not negative. It reports false when
// the queue stops.
func (q *authQueue) spend() bool {
	for {
		q.mu.Lock()
		now := time.Now()
		q.budget = min(q.burst, q.budget+now.Sub(q.refilled).Seconds()*q.refill)
		q.refilled = now
		short := -q.budget
		q.mu.Unlock()
		if short <= 0 {
			return true
		}
		t := time.NewTimer(time.Duration(short / q.refill * float64(time.Second)))
		select {
		case <-q.quit:
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// charge takes d of CPU time from the budget.
func (q *authQueue) charge(d time.Duration) {
	q.mu.Lock()
	q.budget -= float64(d)
	q.mu.Unlock()
}

func (q *authQueue) worker() {
	defer q.wg.Done()
	var clock checkClock
	for {
		if !q.spend() {
			return
		}
		j := q.pop()
		if j == nil {
			select {
			case <-q.quit:
				return
			case <-q.wake:
				continue
			}
		}
		q.mu.Lock()
		more := q.n > 0 || len(q.prio) > 0
		q.mu.Unlock()
		if more {
			q.kick() // another worker may take the next job
		}
		// Running, the check is no longer queued: the auth timeout waits
		// for its answer (bounded by one hash's cost). Queued, it did not.
		if j.started != nil {
			j.started()
		}
		if j.gone() {
			q.s.stats.authDropped.Add(1)
			q.ended(j.src, false)
			j.done(authResult{}, false) // nothing computed for a closed socket
			continue
		}
		t0 := time.Now()
		c0, onCPU := clock.read()
		q.s.stats.authChecks.Add(1)
		perms, user, ok := q.s.authenticate(&j.o)
		cost := time.Since(t0)
		if c1, ok := clock.read(); onCPU && ok {
			cost = c1 - c0 // what the check used of the CPU, not its wait for one
		}
		q.charge(cost)
		q.s.creds.remember(j.o.User, j.o.Pass, perms, ok)
		q.ended(j.src, ok)
		j.done(authResult{o: j.o, perms: perms, user: user, ok: ok}, true)
	}
}
