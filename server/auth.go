package server

// Authentication and permissions (SPEC.md "Security"). With neither a token
// nor users configured every connection is anonymous and allowed everything.
// With auth on, nothing is anonymous: CONNECT must carry the token or a
// user/pass pair whose bcrypt hash matches. Secrets are never logged.

import (
	"crypto/subtle"

	"github.com/fibrilmq/fibril/protocol"
	"golang.org/x/crypto/bcrypt"
)

// authenticate checks CONNECT credentials. It returns the permissions of
// the authenticated identity (nil: everything allowed) and whether the
// credentials were accepted. It may take bcrypt time (tens of ms) and is
// called once per connection.
func (s *Server) authenticate(o *protocol.Connect) (*Permissions, string, bool) {
	if !s.opts.authRequired() {
		return nil, "", true
	}
	if o.User != "" {
		for i := range s.opts.Users {
			u := &s.opts.Users[i]
			if u.Name != o.User {
				continue
			}
			if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(o.Pass)) != nil {
				return nil, u.Name, false
			}
			return &u.Permissions, u.Name, true
		}
		// Unknown users cost a bcrypt run too, so timing does not reveal
		// which names exist.
		_ = bcrypt.CompareHashAndPassword(s.dummyHash, []byte(o.Pass))
		return nil, o.User, false
	}
	if s.opts.Token != "" && o.AuthToken != "" &&
		subtle.ConstantTimeCompare([]byte(o.AuthToken), []byte(s.opts.Token)) == 1 {
		return nil, "", true
	}
	return nil, "", false
}

// allowed applies one allow/deny pair to a literal subject.
func (p *SubjectPermission) allowed(subject string) bool {
	for _, f := range p.Deny {
		if filterMatches(f, subject) {
			return false
		}
	}
	if len(p.Allow) == 0 {
		return true
	}
	for _, f := range p.Allow {
		if filterMatches(f, subject) {
			return true
		}
	}
	return false
}

// allowedFilter applies one allow/deny pair to a subscription filter: a
// filter is allowed when some allow filter covers it entirely and no deny
// filter could match any subject it matches.
func (p *SubjectPermission) allowedFilter(filter string) bool {
	for _, f := range p.Deny {
		if filtersOverlap(f, filter) {
			return false
		}
	}
	if len(p.Allow) == 0 {
		return true
	}
	for _, f := range p.Allow {
		if filterCovers(f, filter) {
			return true
		}
	}
	return false
}

// canPublish reports whether this connection may publish to subject.
func (c *client) canPublish(subject string) bool {
	return c.perms == nil || c.perms.Publish.allowed(subject)
}

// canConsume reports whether this connection may subscribe with filter (or
// consume the topic named filter).
func (c *client) canConsume(filter string) bool {
	return c.perms == nil || c.perms.Consume.allowedFilter(filter)
}
