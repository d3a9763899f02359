package server

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/access"
)

// basicGet does GET url with basic auth user/pass from the loopback
// address src and returns the status.
func basicGet(t *testing.T, url, src, user, pass string) int {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, pass)
	res, err := c.Do(req)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// adminWithUsers starts a server with user app (password pw) and the
// admin listener, and returns it and the listener's base URL.
func adminWithUsers(t *testing.T) (*Server, string) {
	s := startServer(t, func(o *Options) {
		slowAuth(t)(o)
		durableFiles(o)
		o.HTTPListen = "127.0.0.1:0"
	})
	return s, "http://" + s.HTTPAddr().String()
}

// TestAdminHTTPPasswordsGoThroughTheQueue: the admin listener ran a bcrypt
// check inline for every request with basic auth, outside the bounded
// check queue, so anyone who could reach it had an unbounded pre-auth CPU
// path. Its checks now wait in the same queue as CONNECT's: a flood of
// wrong passwords gets 503 past the queue's bound (no check computed),
// and a good login from another address still completes.
func TestAdminHTTPPasswordsGoThroughTheQueue(t *testing.T) {
	s, base := adminWithUsers(t)
	s.auth.owe(time.Second)
	const flood = 24
	var (
		mu    sync.Mutex
		codes = map[int]int{}
		wg    sync.WaitGroup
	)
	for i := range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := basicGet(t, base+"/api/topics", "127.0.0.2", "app", fmt.Sprintf("wrong%d", i))
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	// The flood is queued or shed before the good login is sent.
	waitFor(t, 5*time.Second, "the flood queued or shed", func() bool {
		s.auth.mu.Lock()
		queued := s.auth.n
		s.auth.mu.Unlock()
		return queued+int(s.stats.authShed.Load()) >= flood
	})
	start := time.Now()
	if code := basicGet(t, base+"/api/topics", "127.0.0.1", "app", "pw"); code != http.StatusOK {
		t.Errorf("good login during the flood: %d", code)
	}
	took := time.Since(start)
	wg.Wait()
	bound := s.opts.MaxAuthQueue + 1 // the queue, and the check the good login evicted
	if codes[http.StatusUnauthorized] > bound || s.stats.authChecks.Load() > uint64(bound)+1 {
		t.Errorf("%d wrong passwords checked (%v, %d checks), want at most the queue's %d", codes[http.StatusUnauthorized],
			codes, s.stats.authChecks.Load(), bound)
	}
	if codes[http.StatusServiceUnavailable] < flood-bound {
		t.Errorf("answers %v: want the flood past the queue shed with 503", codes)
	}
	if took > 3*time.Second {
		t.Errorf("good login took %s", took)
	}
}

// TestAdminHTTPLoginIsCached: a dashboard polling with the same basic
// auth costs one check, not one per request.
func TestAdminHTTPLoginIsCached(t *testing.T) {
	s, base := adminWithUsers(t)
	for range 20 {
		if code := basicGet(t, base+"/api/topics", "127.0.0.1", "app", "pw"); code != http.StatusOK {
			t.Fatalf("login: %d", code)
		}
	}
	if n := s.stats.authChecks.Load(); n != 1 {
		t.Errorf("20 requests cost %d checks, want 1", n)
	}
	// The cache answers the wire too.
	w := connectFrom(t, s, "127.0.0.1", "pw")
	w.expect(`^\+OK$`)
	if n := s.stats.authChecks.Load(); n != 1 {
		t.Errorf("a CONNECT with the cached password cost a check (%d)", n)
	}
}

// TestRepeatedWrongPasswordCostsOneCheck: an attacker replaying one wrong
// password (from any address, on the wire or HTTP) costs one check; each
// attempt is still refused.
func TestRepeatedWrongPasswordCostsOneCheck(t *testing.T) {
	s, base := adminWithUsers(t)
	for i := range 8 {
		w := connectFrom(t, s, fmt.Sprintf("127.0.0.%d", 2+i), "guess")
		w.expect(`^-ERR 'Authorization Violation'`)
		if code := basicGet(t, base+"/api/topics", fmt.Sprintf("127.0.1.%d", 2+i), "app", "guess"); code != http.StatusUnauthorized {
			t.Fatalf("HTTP with a wrong password: %d", code)
		}
	}
	if n := s.stats.authChecks.Load(); n != 1 {
		t.Errorf("16 attempts with one wrong password cost %d checks, want 1", n)
	}
	w := connectFrom(t, s, "127.0.0.1", "pw")
	w.expect(`^\+OK$`)
}

// TestCredCache: answers expire after credTTL, each kind holds at most
// maxCreds entries, a pair is told apart from its neighbours (the user
// and password boundary included).
func TestCredCache(t *testing.T) {
	c := newCredCache()
	now := time.Unix(1e9, 0)
	c.now = func() time.Time { return now }
	id := access.Unrestricted()
	c.remember("ann", "pw", id, true)
	c.remember("ann", "bad", nil, false)
	for _, tc := range []struct {
		user, pass string
		ok, hit    bool
	}{
		{"ann", "pw", true, true},
		{"ann", "bad", false, true},
		{"ann", "pw2", false, false},
		{"annp", "w", false, false},
		{"an", "npw", false, false},
	} {
		got, ok, hit := c.lookup(tc.user, tc.pass)
		if ok != tc.ok || hit != tc.hit || (ok && got != id) {
			t.Errorf("lookup(%q, %q) = %v %v, want %v %v", tc.user, tc.pass, ok, hit, tc.ok, tc.hit)
		}
	}
	now = now.Add(credTTL)
	if _, _, hit := c.lookup("ann", "pw"); hit {
		t.Error("an entry outlived credTTL")
	}
	for i := range 3 * maxCreds {
		c.remember("u", fmt.Sprint(i), nil, false)
		c.remember("u", fmt.Sprint(i), id, true)
	}
	if len(c.good) > maxCreds || len(c.bad) > maxCreds {
		t.Errorf("cache holds %d good and %d bad entries, want <= %d each", len(c.good), len(c.bad), maxCreds)
	}
	if _, ok, hit := c.lookup("u", fmt.Sprint(3*maxCreds-1)); !ok || !hit {
		t.Error("the newest entry was evicted")
	}
	var nilCache *credCache
	if _, _, hit := nilCache.lookup("a", "b"); hit {
		t.Error("a nil cache hit")
	}
}

// forget empties the cache (tests).
func (c *credCache) forget() {
	c.mu.Lock()
	clear(c.good)
	clear(c.bad)
	c.mu.Unlock()
}
