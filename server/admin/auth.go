package admin

import (
	"context"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/fibrilmq/fibril/server/access"
)

// Authenticator identifies the caller of a request: it returns the
// identity, or an error: ErrNoCredentials or ErrBadCredentials (answered
// 401), ErrBusy (503 with Retry-After: the password check queue is full),
// or the request context's error. What the identity may do is package
// access's decision (SPEC.md 6.1).
type Authenticator func(r *http.Request) (*access.Identity, error)

// Errors an Authenticator returns.
var (
	ErrNoCredentials  = errors.New("admin: no credentials")
	ErrBadCredentials = errors.New("admin: bad credentials")
	// ErrBusy: the password could not be checked now (the server's check
	// queue is full); the client should retry.
	ErrBusy = errors.New("admin: password checks busy")
)

// TokenAuth returns an Authenticator that accepts "Authorization: Bearer
// <token>" or HTTP basic auth whose password is token (any user name, so a
// browser can log in to the dashboard) as the unrestricted identity. The
// comparison is constant time. An empty token returns nil: no token
// configured means no token check (an empty password must never pass).
func TokenAuth(token string) Authenticator {
	if token == "" {
		return nil
	}
	want := []byte(token)
	return func(r *http.Request) (*access.Identity, error) {
		ok := false
		if _, pass, basic := r.BasicAuth(); basic {
			ok = subtle.ConstantTimeCompare([]byte(pass), want) == 1
		} else if t, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); bearer {
			ok = subtle.ConstantTimeCompare([]byte(strings.TrimSpace(t)), want) == 1
		} else {
			return nil, ErrNoCredentials
		}
		if !ok {
			return nil, ErrBadCredentials
		}
		return access.Unrestricted(), nil
	}
}

// PasswordChecker verifies a user's password for the admin listener. The
// server's checker shares the bounded, per-source-fair queue of client
// logins and its cache of recent answers, so the listener opens no CPU
// path of its own to anyone who can reach it.
type PasswordChecker interface {
	// CheckPassword returns user's identity when pass is its password,
	// asked from source (the client's IP address, the queue's fairness
	// key). It blocks until the check is done, the queue gives up, or ctx
	// ends; it returns ErrBadCredentials, ErrBusy or ctx's error.
	CheckPassword(ctx context.Context, user, pass, source string) (*access.Identity, error)
}

// BasicAuth returns an Authenticator that accepts HTTP basic auth whose
// user and password pc accepts. A nil pc returns nil (no user check).
func BasicAuth(pc PasswordChecker) Authenticator {
	if pc == nil {
		return nil
	}
	return func(r *http.Request) (*access.Identity, error) {
		name, pass, ok := r.BasicAuth()
		if !ok {
			return nil, ErrNoCredentials
		}
		src := r.RemoteAddr
		if host, _, err := net.SplitHostPort(src); err == nil {
			src = host
		}
		return pc.CheckPassword(r.Context(), name, pass, src)
	}
}

// AnyAuth returns an Authenticator that accepts a request when one of fs
// does (nil entries are skipped; the first that accepts names the
// identity); with no usable entry it returns nil, which means no
// authentication (everyone is the unrestricted identity). Refused by all,
// the request gets the most telling error: ErrBusy or a context error
// over ErrBadCredentials over ErrNoCredentials.
func AnyAuth(fs ...Authenticator) Authenticator {
	var use []Authenticator
	for _, f := range fs {
		if f != nil {
			use = append(use, f)
		}
	}
	if len(use) == 0 {
		return nil
	}
	return func(r *http.Request) (*access.Identity, error) {
		worst := ErrNoCredentials
		for _, f := range use {
			id, err := f(r)
			if err == nil {
				return id, nil
			}
			if rank(err) > rank(worst) {
				worst = err
			}
		}
		return nil, worst
	}
}

// rank orders AnyAuth's refusals: the one that says most wins.
func rank(err error) int {
	switch {
	case errors.Is(err, ErrNoCredentials):
		return 0
	case errors.Is(err, ErrBadCredentials):
		return 1
	default: // ErrBusy, a context error, anything else
		return 2
	}
}

type identityKey struct{}

// identityOf is the identity the request authenticated as (the
// unrestricted identity without authentication).
func identityOf(r *http.Request) *access.Identity {
	if id, ok := r.Context().Value(identityKey{}).(*access.Identity); ok && id != nil {
		return id
	}
	return access.Unrestricted()
}

func withIdentity(r *http.Request, id *access.Identity) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), identityKey{}, id))
}
