package server

// Names of recent connections for the admin message history: a delivery's
// owner is the connection id, and the history is read after the consumer
// may have gone. Open connections are looked up live; closed ones are
// remembered in a bounded ring (under Server.mu).

import (
	"github.com/fibrilmq/fibril/server/admin"
)

// recentClosedConns bounds how many closed connections LookupConn remembers.
const recentClosedConns = 1024

// closedConns is a ring of the last closed connections.
type closedConns struct {
	ring []admin.ConnRef // oldest overwritten once full
	next int             // where the next one goes
	byID map[uint64]int  // id → index in ring
}

func (r *closedConns) add(ref admin.ConnRef, limit int) {
	if r.byID == nil {
		r.byID = make(map[uint64]int)
	}
	if len(r.ring) < limit {
		r.byID[ref.ID] = len(r.ring)
		r.ring = append(r.ring, ref)
		return
	}
	delete(r.byID, r.ring[r.next].ID)
	r.ring[r.next] = ref
	r.byID[ref.ID] = r.next
	r.next = (r.next + 1) % limit
}

func (r *closedConns) get(id uint64) (admin.ConnRef, bool) {
	i, ok := r.byID[id]
	if !ok {
		return admin.ConnRef{}, false
	}
	return r.ring[i], true
}

// connRef names c as the history shows it.
func (c *client) connRef(open bool) admin.ConnRef {
	c.mu.Lock()
	m := c.meta
	c.mu.Unlock()
	return admin.ConnRef{ID: c.id, Name: m.name, Remote: c.tr.remoteAddr(), User: m.user, Open: open}
}

// LookupConn names connection id: open, or among the last 1024 closed. It
// implements admin.ConnResolver and never blocks on a connection.
func (s *Server) LookupConn(id uint64) (admin.ConnRef, bool) {
	s.mu.Lock()
	c, open := s.clients[id]
	ref, closed := s.closed.get(id)
	s.mu.Unlock()
	if open {
		return c.connRef(true), true
	}
	return ref, closed
}
