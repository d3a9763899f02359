package server

// Password verification shared by client logins and the admin HTTP
// listener (SPEC.md "Security"). Every bcrypt run, whoever asks for it,
// goes through the bounded, per-source-fair check queue (authqueue.go);
// in front of the queue a short-lived cache of verified credentials
// answers at once:
//
//   - A user/password pair that was verified in the last credTTL passes
//     without a check, so a dashboard polling every second, or a client
//     reconnecting, costs no bcrypt.
//   - A pair that was refused in the last credTTL is refused without a
//     check, so an attacker replaying the same wrong password from any
//     number of addresses costs one check, not one per attempt. (Guessing,
//     with a new password each time, is what the queue's bounds are for.)
//
// Entries are keyed by HMAC-SHA256 of the user name and password under a
// key drawn at random for each process: the cache holds neither, and an
// entry read from memory cannot be tested against a guess without that
// key. The cache holds at most maxCreds entries of each kind.
//
// Users are fixed for a server's life (Options), so a cached answer never
// goes stale; the TTL bounds how long a secret's trace stays in memory.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/admin"
)

// Bounds of the credential cache.
const (
	credTTL  = 2 * time.Minute
	maxCreds = 1024
)

// credKey is the HMAC of one user/password pair.
type credKey [sha256.Size]byte

type credEntry struct {
	id      *access.Identity // nil for a refused pair
	expires time.Time
}

// credCache remembers verified and refused credentials (see the top of
// this file). Safe for concurrent use.
type credCache struct {
	key [32]byte
	now func() time.Time

	mu   sync.Mutex
	good map[credKey]credEntry
	bad  map[credKey]credEntry
}

func newCredCache() *credCache {
	c := &credCache{now: time.Now, good: make(map[credKey]credEntry), bad: make(map[credKey]credEntry)}
	_, _ = rand.Read(c.key[:])
	return c
}

func (c *credCache) keyOf(user, pass string) credKey {
	m := hmac.New(sha256.New, c.key[:])
	m.Write([]byte(user))
	m.Write([]byte{0})
	m.Write([]byte(pass))
	var k credKey
	m.Sum(k[:0])
	return k
}

// lookup reports whether user/pass was verified (ok, with its identity) or
// refused (not ok) in the last credTTL; hit is false when neither.
func (c *credCache) lookup(user, pass string) (id *access.Identity, ok, hit bool) {
	if c == nil {
		return nil, false, false
	}
	k := c.keyOf(user, pass)
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, found := c.good[k]; found {
		if now.Before(e.expires) {
			return e.id, true, true
		}
		delete(c.good, k)
	}
	if e, found := c.bad[k]; found {
		if now.Before(e.expires) {
			return nil, false, true
		}
		delete(c.bad, k)
	}
	return nil, false, false
}

// remember records the outcome of a check of user/pass.
func (c *credCache) remember(user, pass string, id *access.Identity, ok bool) {
	if c == nil || user == "" {
		return
	}
	k := c.keyOf(user, pass)
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.bad
	if ok {
		m = c.good
	} else {
		id = nil
	}
	if _, found := m[k]; !found && len(m) >= maxCreds {
		evict(m, now)
	}
	m[k] = credEntry{id: id, expires: now.Add(credTTL)}
}

// evict makes room in a full map: expired entries go, and if none had
// expired, one entry chosen by the map's random order.
func evict(m map[credKey]credEntry, now time.Time) {
	for k, e := range m {
		if !now.Before(e.expires) {
			delete(m, k)
		}
	}
	if len(m) < maxCreds {
		return
	}
	for k := range m {
		delete(m, k)
		return
	}
}

// adminPasswords checks the admin listener's basic-auth passwords through
// the server's credential cache and check queue (admin.PasswordChecker).
type adminPasswords struct{ s *Server }

// CheckPassword implements admin.PasswordChecker: a cached answer at once,
// else a check queued like a CONNECT's from source, waited for at most
// AuthTimeout (the wire's bound on a login) or until ctx ends.
func (p adminPasswords) CheckPassword(ctx context.Context, user, pass, source string) (*access.Identity, error) {
	s := p.s
	if id, ok, hit := s.creds.lookup(user, pass); hit {
		if !ok {
			return nil, admin.ErrBadCredentials
		}
		s.auth.trust(source)
		return id, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.AuthTimeout)
	defer cancel()
	type outcome struct {
		r       authResult
		checked bool
	}
	res := make(chan outcome, 1)
	j := &authJob{
		o:    protocol.Connect{User: user, Pass: pass},
		src:  source,
		gone: func() bool { return ctx.Err() != nil },
		done: func(r authResult, checked bool) { res <- outcome{r, checked} },
	}
	if !s.auth.submit(j) {
		return nil, admin.ErrBusy
	}
	select {
	case o := <-res:
		switch {
		case !o.checked:
			return nil, admin.ErrBusy
		case !o.r.ok:
			return nil, admin.ErrBadCredentials
		}
		return o.r.perms, nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, admin.ErrBusy // the queue did not reach it in time
		}
		return nil, ctx.Err()
	}
}
