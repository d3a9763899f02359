package server

// Connection listing and traffic counters for the admin listener
// (server/admin.ConnSource): per connection and server-wide totals of
// messages and bytes in and out. Counters are atomics bumped where the
// bytes pass; the listing takes each client's lock briefly and never waits
// on a connection.

import (
	"sort"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/admin"
)

// serverStats are totals since Run.
type serverStats struct {
	conns                              atomic.Uint64 // connections admitted
	moved                              atomic.Uint64 // connections moved off gnet (conn_moved.go)
	inMsgs, inBytes, outMsgs, outBytes atomic.Uint64
	slowConsumers                      atomic.Uint64 // connections cut as slow consumers
	// Password checks (authqueue.go): computed, shed with auth_busy, and
	// dropped uncomputed because their connection had closed.
	authChecks, authShed, authDropped atomic.Uint64
	// preAuthWakeups counts the input callbacks of connections not yet
	// authenticated (conn_gnet.go, "Pre-auth reads").
	preAuthWakeups atomic.Uint64
}

// traffic counts one connection's messages and bytes; bumped where the
// bytes pass, from any goroutine.
type traffic struct {
	inMsgs, inBytes, outMsgs, outBytes atomic.Uint64
}

// connMeta is what CONNECT said, for the listing (under client.mu).
type connMeta struct {
	name, lang, version, user string
	fibril                    bool
}

func (c *client) setMeta(o protocol.Connect) {
	c.mu.Lock()
	user := c.meta.user
	c.meta = connMeta{name: o.Name, lang: o.Lang, version: o.Version, user: user, fibril: o.Fibril >= 1}
	c.mu.Unlock()
}

func (c *client) setUser(user string) {
	c.mu.Lock()
	c.meta.user = user
	c.mu.Unlock()
}

func (c *client) countIn(n int) {
	if n > 0 {
		c.traffic.inBytes.Add(uint64(n))
		c.srv.stats.inBytes.Add(uint64(n))
	}
}

func (c *client) countOut(n int) {
	if n > 0 {
		c.traffic.outBytes.Add(uint64(n))
		c.srv.stats.outBytes.Add(uint64(n))
	}
}

func (c *client) countOutMsgs(n int) {
	if n > 0 {
		c.traffic.outMsgs.Add(uint64(n))
		c.srv.stats.outMsgs.Add(uint64(n))
	}
}

// Connections lists the open client connections, ordered by id. It
// implements admin.ConnSource; it never blocks on a connection.
func (s *Server) Connections() []admin.ConnInfo {
	s.mu.Lock()
	cls := make([]*client, 0, len(s.clients))
	for _, c := range s.clients {
		cls = append(cls, c)
	}
	s.mu.Unlock()
	out := make([]admin.ConnInfo, 0, len(cls))
	for _, c := range cls {
		out = append(out, c.connInfo())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (c *client) connInfo() admin.ConnInfo {
	c.mu.Lock()
	m := c.meta
	subs := len(c.subs)
	pending := c.pendingLocked()
	c.mu.Unlock()
	return admin.ConnInfo{
		ID: c.id, Remote: c.tr.remoteAddr(),
		Name: m.name, Lang: m.lang, Version: m.version, User: m.user,
		TLS: c.tr.isTLS(), Fibril: m.fibril, Connected: c.live.created.UTC().Truncate(time.Millisecond),
		Subs:   subs,
		InMsgs: c.traffic.inMsgs.Load(), OutMsgs: c.traffic.outMsgs.Load(),
		InBytes: c.traffic.inBytes.Load(), OutBytes: c.traffic.outBytes.Load(),
		Pending: pending,
	}
}

// Totals returns the server-wide counters since Run (admin.TotalsSource).
func (s *Server) Totals() admin.ServerTotals {
	return admin.ServerTotals{
		Connections: s.stats.conns.Load(),
		InMsgs:      s.stats.inMsgs.Load(), OutMsgs: s.stats.outMsgs.Load(),
		InBytes: s.stats.inBytes.Load(), OutBytes: s.stats.outBytes.Load(),
	}
}
