package server

// Authentication, and the identity whose rights every command is checked
// against (SPEC.md 6.1; the decisions are package access's). With neither
// a token nor users configured every connection is the unrestricted
// identity. With auth on, nothing is anonymous: CONNECT must carry the
// token (the unrestricted identity) or a user/pass pair whose bcrypt hash
// matches (that user's identity). Secrets are never logged.

import (
	"crypto/subtle"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
	"golang.org/x/crypto/bcrypt"
)

// identities builds each configured user's identity (principal index+2;
// access.PrincipalUnrestricted is 1).
func identities(users []User) []*access.Identity {
	ids := make([]*access.Identity, len(users))
	for i, u := range users {
		ids[i] = access.NewUser(u.Name, u.Role, uint16(i+2), u.Permissions)
	}
	return ids
}

// authenticate checks CONNECT credentials. It returns the authenticated
// identity, the user name, and whether the credentials were accepted. It
// may take bcrypt time (tens of ms) and is called once per connection.
func (s *Server) authenticate(o *protocol.Connect) (*access.Identity, string, bool) {
	if !s.opts.authRequired() {
		return access.Unrestricted(), "", true
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
			return s.ids[i], u.Name, true
		}
		// Unknown users cost a bcrypt run too, so timing does not reveal
		// which names exist.
		_ = bcrypt.CompareHashAndPassword(s.dummyHash, []byte(o.Pass))
		return nil, o.User, false
	}
	if s.opts.Token != "" && o.AuthToken != "" &&
		subtle.ConstantTimeCompare([]byte(o.AuthToken), []byte(s.opts.Token)) == 1 {
		return access.Unrestricted(), "", true
	}
	return nil, "", false
}

// authenticateForward checks a forwarding node's CONNECT (SPEC.md 11.2):
// the token this node announced, and the user it forwards for, who then
// holds that user's permissions here.
func (s *Server) authenticateForward(o *protocol.Connect) (*access.Identity, string, bool) {
	if s.cluster == nil || subtle.ConstantTimeCompare([]byte(o.Forward), []byte(s.cluster.token)) != 1 {
		return nil, o.As, false
	}
	if o.As == "" {
		// A node's plain interest (interest.go) runs as the cluster; only
		// a client with no auth or with the shared token has no user.
		return access.Unrestricted(), "", o.Plain || !s.opts.authRequired() || s.opts.Token != ""
	}
	for i := range s.opts.Users {
		if s.opts.Users[i].Name == o.As {
			return s.ids[i], o.As, true
		}
	}
	return nil, o.As, false
}

// principal is this connection's identity in lease records.
func (c *client) principal() broker.Principal {
	if c.login.perms == nil {
		return broker.Principal(access.PrincipalUnrestricted)
	}
	return broker.Principal(c.login.perms.Principal)
}

// bindLeases binds the leases this connection takes to its identity, so
// that only that identity settles them (SPEC.md 9.2). The binding leaves
// with the connection's ReleaseOwner; a connection that closed meanwhile
// (its password check outlived it) takes it back itself, so no entry
// outlives its connection.
func (c *client) bindLeases() {
	if c.srv.durable == nil {
		return
	}
	b := c.srv.durable.b
	b.SetPrincipal(c.owner(), c.principal())
	if c.isClosing() {
		// release sets closing before it calls ReleaseOwner: either that
		// ran after the store above, or this sees closing.
		b.SetPrincipal(c.owner(), 0)
	}
}

// canPublish reports whether this connection may publish to subject.
func (c *client) canPublish(subject string) bool {
	return c.login.perms.Publish(subject) == nil
}

// canConsume reports whether this connection may subscribe with filter.
func (c *client) canConsume(filter string) bool {
	return c.login.perms.Subscribe(filter) == nil
}
