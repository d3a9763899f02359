package admin

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/fibrilmq/fibril/server/access"
)

// Authenticator identifies the caller of a request: it returns the
// identity and true, or false when the request carries no valid
// credentials (answered 401). What the identity may do is package
// access's decision (SPEC.md 6.1).
type Authenticator func(r *http.Request) (*access.Identity, bool)

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
	return func(r *http.Request) (*access.Identity, bool) {
		ok := false
		if _, pass, basic := r.BasicAuth(); basic {
			ok = subtle.ConstantTimeCompare([]byte(pass), want) == 1
		} else if t, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); bearer {
			ok = subtle.ConstantTimeCompare([]byte(strings.TrimSpace(t)), want) == 1
		}
		if !ok {
			return nil, false
		}
		return access.Unrestricted(), true
	}
}

// User is one account BcryptAuth accepts: the bcrypt hash of its password
// and the identity it authenticates as.
type User struct {
	Hash     string
	Identity *access.Identity
}

// BcryptAuth returns an Authenticator that accepts HTTP basic auth whose
// password matches the bcrypt hash of that user in users (by name). Each
// check costs one bcrypt run. No users returns nil (no user check).
func BcryptAuth(users map[string]User) Authenticator {
	if len(users) == 0 {
		return nil
	}
	own := make(map[string]User, len(users))
	cost := bcrypt.DefaultCost
	for name, u := range users {
		own[name] = u
		if c, err := bcrypt.Cost([]byte(u.Hash)); err == nil {
			cost = c
		}
	}
	// An unknown user is checked against this hash of the same cost, so
	// the answer takes bcrypt time either way and does not reveal which
	// users exist. Its password is never the one sent (a NUL byte).
	dummyHash, err := bcrypt.GenerateFromPassword([]byte{0}, cost)
	if err != nil {
		dummyHash = nil // then unknown users answer fast; still refused
	}
	return func(r *http.Request) (*access.Identity, bool) {
		name, pass, ok := r.BasicAuth()
		if !ok {
			return nil, false
		}
		u, known := own[name]
		h := dummyHash
		if known {
			h = []byte(u.Hash)
		}
		if bcrypt.CompareHashAndPassword(h, []byte(pass)) != nil || !known {
			return nil, false
		}
		return u.Identity, true
	}
}

// AnyAuth returns an Authenticator that accepts a request when one of fs
// does (nil entries are skipped; the first that accepts names the
// identity); with no usable entry it returns nil, which means no
// authentication (everyone is the unrestricted identity).
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
	return func(r *http.Request) (*access.Identity, bool) {
		for _, f := range use {
			if id, ok := f(r); ok {
				return id, true
			}
		}
		return nil, false
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
