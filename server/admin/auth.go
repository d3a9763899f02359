package admin

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// TokenAuth returns an Authorize function that accepts "Authorization:
// Bearer <token>" or HTTP basic auth whose password is token (any user name,
// so a browser can log in to the dashboard). The comparison is constant time.
// An empty token returns nil: no token configured means no token check (an
// empty password must never pass).
func TokenAuth(token string) func(r *http.Request) bool {
	if token == "" {
		return nil
	}
	want := []byte(token)
	return func(r *http.Request) bool {
		if _, pass, ok := r.BasicAuth(); ok {
			return subtle.ConstantTimeCompare([]byte(pass), want) == 1
		}
		h := r.Header.Get("Authorization")
		if t, ok := strings.CutPrefix(h, "Bearer "); ok {
			return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(t)), want) == 1
		}
		return false
	}
}

// BcryptAuth returns an Authorize function that accepts HTTP basic auth
// whose password matches the bcrypt hash of that user in users (name →
// hash, as in the server's user list). Each check costs one bcrypt run.
// No users returns nil (no user check).
func BcryptAuth(users map[string]string) func(r *http.Request) bool {
	if len(users) == 0 {
		return nil
	}
	own := make(map[string][]byte, len(users))
	cost := bcrypt.DefaultCost
	for u, h := range users {
		own[u] = []byte(h)
		if c, err := bcrypt.Cost([]byte(h)); err == nil {
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
	return func(r *http.Request) bool {
		user, pass, ok := r.BasicAuth()
		if !ok {
			return false
		}
		h, known := own[user]
		if !known {
			h = dummyHash
		}
		return bcrypt.CompareHashAndPassword(h, []byte(pass)) == nil && known
	}
}

// AnyAuth returns an Authorize function that accepts a request when one of
// fs does (nil entries are skipped); with no usable entry it returns nil,
// which means no authorization.
func AnyAuth(fs ...func(r *http.Request) bool) func(r *http.Request) bool {
	var use []func(r *http.Request) bool
	for _, f := range fs {
		if f != nil {
			use = append(use, f)
		}
	}
	if len(use) == 0 {
		return nil
	}
	return func(r *http.Request) bool {
		for _, f := range use {
			if f(r) {
				return true
			}
		}
		return false
	}
}
