package server

import (
	"bufio"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Short-form tests of the password-check queue (authqueue.go); the load
// figures (1,000 hostile connections against a logged-in client) are
// measured by BenchmarkHostilePreAuth.

// slowAuth: one user whose checks cost a cost-4 hash, a queue of 2. The
// tests hold checks back by putting the budget into debt (owe), so each
// check's own cost (much larger under -race on a busy machine) adds little.
func slowAuth(t *testing.T) func(*Options) {
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return func(o *Options) {
		o.Users = []User{{Name: "app", PasswordHash: string(h)}}
		o.AuthCPUPercent = 50
		o.MaxAuthQueue = 2
	}
}

// owe puts the check budget d of wall time into debt: no check starts
// before d has passed (a worker idle now sees it at its next job).
func (q *authQueue) owe(d time.Duration) {
	q.mu.Lock()
	q.budget = -d.Seconds() * q.refill
	q.refilled = time.Now()
	q.mu.Unlock()
}

// connectFrom dials s from the loopback address src (127.0.0.x) and sends
// a CONNECT with the given password.
func connectFrom(t *testing.T, s *Server, src, pass string) *wireConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	nc, err := d.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	w := &wireConn{t: t, nc: nc, r: bufio.NewReaderSize(nc, 1<<16)}
	w.send(`CONNECT {"fibril":1,"user":"app","pass":"` + pass + `"}` + "\r\n")
	w.expect(`^INFO `)
	return w
}

// TestAuthQueueShedsWithAuthBusy: CONNECTs beyond the bounded queue used to
// wait without end (1,000 wrong passwords made logins take 52 s); now
// they are answered auth_busy at once, and a login from another source
// takes the place of one of the flood's checks and completes.
func TestAuthQueueShedsWithAuthBusy(t *testing.T) {
	s := startServer(t, slowAuth(t))
	s.auth.owe(2 * time.Second)
	var (
		mu      sync.Mutex
		answers = map[string]int{}
		wg      sync.WaitGroup
	)
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := connectFrom(t, s, "127.0.0.2", "wrong")
			l, _ := w.line()
			mu.Lock()
			answers[l]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	busy := 0
	for l, n := range answers {
		if strings.HasPrefix(l, "-ERR 'auth_busy ") {
			busy += n
		}
	}
	if busy < 12-2 { // the queue holds 2
		t.Fatalf("%d CONNECTs answered auth_busy, want >= 9: %v", busy, answers)
	}
	for l := range answers {
		if !strings.Contains(l, "auth_busy") && !strings.Contains(l, "Authorization Violation") && !strings.Contains(l, "Authentication Timeout") {
			t.Fatalf("unexpected answer %q (%v)", l, answers)
		}
	}
}

// TestAuthQueueFairToOtherSources: with the queue full of one source's
// checks, a login from another source is not shed: it takes the place of
// the busiest source's newest check.
func TestAuthQueueFairToOtherSources(t *testing.T) {
	s := startServer(t, func(o *Options) {
		slowAuth(t)(o)
		o.AuthTimeout = 10 * time.Second
	})
	s.auth.owe(time.Second)
	flood := make([]*wireConn, 0, 4)
	for range 4 {
		flood = append(flood, connectFrom(t, s, "127.0.0.2", "wrong"))
	}
	waitFor(t, 5*time.Second, "the flood to fill the queue", func() bool { return s.stats.authShed.Load() >= 1 })
	w := connectFrom(t, s, "127.0.0.3", "pw")
	_ = w.nc.SetReadDeadline(time.Now().Add(8 * time.Second))
	if l, err := w.r.ReadString('\n'); err != nil || strings.TrimSpace(l) != "+OK" {
		t.Fatalf("login from another source: %q %v", l, err)
	}
	_ = flood
}

// TestAuthTimeoutNotSuspendedWhileQueued: a CONNECT whose check waited in
// the queue used to hold the auth timeout off for as long as it waited
// (132 s of checks after 1,000 attackers left). The timeout counts from
// accept: a queued check times out, and is then never computed.
func TestAuthTimeoutNotSuspendedWhileQueued(t *testing.T) {
	s := startServer(t, func(o *Options) {
		slowAuth(t)(o)
		o.AuthTimeout = 300 * time.Millisecond
		o.MaxAuthQueue = 8
	})
	first := connectFrom(t, s, "127.0.0.2", "wrong")
	first.expect(`^-ERR 'Authorization Violation'$`)
	s.auth.owe(3 * time.Second)
	start := time.Now()
	var ws []*wireConn
	for _, src := range []string{"127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		ws = append(ws, connectFrom(t, s, src, "pw"))
	}
	for _, w := range ws {
		w.expect(`^-ERR 'Authentication Timeout'$`)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("queued CONNECTs timed out after %s, auth timeout 300ms", d)
	}
	checks := s.stats.authChecks.Load()
	waitFor(t, 10*time.Second, "the timed-out checks to be dropped", func() bool { return s.stats.authDropped.Load() >= 3 })
	if got := s.stats.authChecks.Load(); got != checks || got != 1 {
		t.Fatalf("%d checks computed, %d before the drops: checks ran for closed sockets", got, checks)
	}
}

// TestAuthQueueServesKnownSourcesFirst: with the queue full of checks
// from many addresses (one each: no busiest source to take a place from),
// a login from an address that logged in before is neither shed nor made
// to wait its turn behind every attacking address.
func TestAuthQueueServesKnownSourcesFirst(t *testing.T) {
	s := startServer(t, func(o *Options) {
		slowAuth(t)(o)
		o.AuthTimeout = 10 * time.Second
	})
	w := connectFrom(t, s, "127.0.0.5", "pw")
	w.expect(`^\+OK$`)
	s.creds.forget() // the next login is checked, not answered from the cache
	s.auth.owe(3 * time.Second)
	for i := range 6 {
		connectFrom(t, s, fmt.Sprintf("127.0.0.%d", 10+i), "wrong")
	}
	waitFor(t, 5*time.Second, "the queue to shed", func() bool { return s.stats.authShed.Load() >= 1 })
	start := time.Now()
	w = connectFrom(t, s, "127.0.0.5", "pw")
	w.expect(`^\+OK$`)
	t.Logf("login from a known source took %s under the flood", time.Since(start))
}

// TestAuthQueueServesANewAddressNext: a new address used to join the end
// of the round-robin, behind one turn of every attacking address (with
// ten of them, a login took over a second). The source served least
// recently goes next: attackers keep taking turns among themselves, and a
// new address is served at the next check.
func TestAuthQueueServesANewAddressNext(t *testing.T) {
	s, err := New(testOptions(t, slowAuth(t)))
	if err != nil {
		t.Fatal(err)
	}
	q := bareQueue(s, 100)
	for i := range 5 {
		q.ended(fmt.Sprintf("10.0.0.%d", i), false) // attackers: they failed before
	}
	for range 4 {
		for i := range 5 {
			if !q.submit(queuedJob(fmt.Sprintf("10.0.0.%d", i))) {
				t.Fatal("shed")
			}
		}
	}
	seen := map[string]bool{}
	for range 7 { // one turn each, and two more
		seen[q.pop().src] = true
	}
	if len(seen) != 5 {
		t.Fatalf("attackers served %v: want each one turn (round-robin)", seen)
	}
	q.submit(queuedJob("10.0.1.1"))
	if got := q.pop().src; got != "10.0.1.1" {
		t.Fatalf("after the new address's CONNECT the next check is %s's", got)
	}
	// The attackers go on in turns, least recently served first.
	last := map[string]int{}
	for i := range 10 {
		j := q.pop()
		if j == nil {
			break
		}
		if k, ok := last[j.src]; ok && i-k < 4 {
			t.Fatalf("%s served again after %d checks", j.src, i-k)
		}
		last[j.src] = i
	}
}

// bareQueue is an authQueue of s without workers, holding at most limit
// checks: tests submit and pop by hand.
func bareQueue(s *Server, limit int) *authQueue {
	return &authQueue{s: s, bySrc: map[string][]*authJob{}, inFresh: map[string]bool{}, failed: map[string]time.Time{},
		trusted: map[string]time.Time{}, served: map[string]time.Time{}, limit: limit, wake: make(chan struct{}, 1)}
}

// queuedJob is a check from src whose connection stays open.
func queuedJob(src string) *authJob {
	return &authJob{src: src, gone: func() bool { return false }, done: func(authResult, bool) {}}
}

// TestAuthQueueNewAddressAheadOfFailedOnes: with wrong passwords guessed
// from many addresses, one check each (issue 23's guessing_spread: 1,000
// addresses), a new address's first login used to find the queue full of
// checks from single-check sources, with no busiest source to take a
// place from, and was answered auth_busy (4 of 5 logins; the fifth took
// 2.27 s). Addresses that failed recently now wait in the main lane: a
// new address takes the place of one of their checks and is served next,
// and a source gets one place in the fresh lane, not one per connection.
func TestAuthQueueNewAddressAheadOfFailedOnes(t *testing.T) {
	s, err := New(testOptions(t, slowAuth(t)))
	if err != nil {
		t.Fatal(err)
	}
	q := bareQueue(s, 8)
	shed := 0
	// The attack starts: every address is new, the queue fills, the rest
	// are shed (and so count as failed).
	for i := range 40 {
		if !q.submit(queuedJob(fmt.Sprintf("10.1.0.%d", i))) {
			shed++
		}
	}
	if shed != 40-8 {
		t.Fatalf("%d of 40 first attempts shed with a queue of 8, want 32", shed)
	}
	// The queued ones are computed and refused.
	for range 8 {
		j := q.pop()
		q.ended(j.src, false)
	}
	if j := q.pop(); j != nil {
		t.Fatalf("queue not empty after 8 checks: %s", j.src)
	}
	// The attackers come back, each from an address that failed: they
	// fill the main lane, one check each.
	shed = 0
	for i := range 40 {
		if !q.submit(queuedJob(fmt.Sprintf("10.1.0.%d", i))) {
			shed++
		}
	}
	if shed != 40-8 {
		t.Fatalf("%d of 40 returning attackers shed, want 32", shed)
	}
	// A new address: not shed, and its check is the next one.
	if !q.submit(queuedJob("10.9.9.9")) {
		t.Fatal("a new address's first login was shed behind addresses that failed")
	}
	if got := q.pop().src; got != "10.9.9.9" {
		t.Fatalf("after the new address's CONNECT the next check is %s's, want 10.9.9.9", got)
	}
	// Its second connection while the first waits does not take a second
	// place in the fresh lane: it waits its turn in the main lane.
	q.submit(queuedJob("10.9.9.8"))
	q.submit(queuedJob("10.9.9.8"))
	if got := q.pop().src; got != "10.9.9.8" {
		t.Fatalf("next check %s's, want the new address 10.9.9.8's first", got)
	}
	if got := q.pop().src; got == "10.9.9.8" {
		t.Fatal("a new address's second check went ahead of the main lane: one place per source in the fresh lane")
	}
	// Bounded: the lanes hold at most 8 checks together.
	if q.n > 8 {
		t.Fatalf("%d checks queued, limit 8", q.n)
	}
}

// TestAuthQueueFailedSourcesBounded: the addresses remembered as failed
// stay at maxFailed however many attack.
func TestAuthQueueFailedSourcesBounded(t *testing.T) {
	s, err := New(testOptions(t, slowAuth(t)))
	if err != nil {
		t.Fatal(err)
	}
	q := bareQueue(s, 8)
	for i := range maxFailed + 100 {
		q.ended(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), false)
	}
	if len(q.failed) != maxFailed {
		t.Fatalf("%d failed sources remembered, want %d", len(q.failed), maxFailed)
	}
}

// TestCheckClockChargesCPUNotWaiting: a check's cost used to be charged in
// wall time, so on a busy machine the budget waited for CPU the checks
// never used (a new login then took 0.8 s behind one check). The clock
// counts the thread's CPU: nothing for a sleep, and work when it works.
func TestCheckClockChargesCPUNotWaiting(t *testing.T) {
	done := make(chan struct{})
	noClock := false
	go func() { // a goroutine of its own: read locks it to its thread
		defer close(done)
		var k checkClock
		c0, ok := k.read()
		if !ok {
			noClock = true
			return
		}
		time.Sleep(200 * time.Millisecond)
		c1, _ := k.read()
		if c1-c0 > 100*time.Millisecond {
			t.Errorf("a 200 ms sleep charged %s of CPU", c1-c0)
		}
		x := uint64(1)
		for c := c1; c-c1 < 20*time.Millisecond; c, _ = k.read() {
			for i := range 100000 {
				x = x*6364136223846793005 + uint64(i)
			}
		}
		_ = x
	}()
	<-done
	if noClock {
		t.Skipf("no thread CPU clock on %s: checks are charged their wall time", runtime.GOOS)
	}
}

// TestSourceOfGroupsIPv6By64: IPv6 addresses were keyed one by one, so a
// host with a /64 (the usual allocation) had 2^64 fresh sources to guess
// from; they are keyed by their /64 now, IPv4 (also IPv4-mapped) by
// address.
func TestSourceOfGroupsIPv6By64(t *testing.T) {
	for _, tc := range []struct{ remote, want string }{
		{"10.0.0.1:5000", "10.0.0.1"},
		{"[::ffff:10.0.0.1]:5000", "10.0.0.1"},
		{"[2001:db8:1:2::5]:9", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff:ffff:ffff:1]:9", "2001:db8:1:2::/64"},
		{"[2001:db8:1:3::5]:9", "2001:db8:1:3::/64"},
		{"[::1]:4222", "::/64"},
		{"not-an-address", "not-an-address"},
	} {
		if got := sourceOf(tc.remote); got != tc.want {
			t.Errorf("sourceOf(%q) = %q, want %q", tc.remote, got, tc.want)
		}
	}
}

// TestAuthQueueTrustRevokedByAFailedLogin: an address that logged in once
// kept its trusted lane after guessing wrong, so it could guess ahead of
// every new address; an unsuccessful attempt now ends its trust.
func TestAuthQueueTrustRevokedByAFailedLogin(t *testing.T) {
	s, err := New(testOptions(t, slowAuth(t)))
	if err != nil {
		t.Fatal(err)
	}
	q := bareQueue(s, 8)
	q.trust("10.0.0.1")
	q.trust("10.0.0.3")
	q.ended("10.0.0.1", false) // then guessed wrong
	for _, src := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"} {
		if !q.submit(queuedJob(src)) {
			t.Fatalf("%s shed", src)
		}
	}
	var order []string
	for j := q.pop(); j != nil; j = q.pop() {
		order = append(order, j.src)
	}
	if want := []string{"10.0.0.3", "10.0.0.2", "10.0.0.1"}; !slices.Equal(order, want) {
		t.Fatalf("served %v, want %v: the trusted one, the new one, then the one that failed", order, want)
	}
}
