package server

// Lingering close. After a fatal error the server writes -ERR and closes
// (SPEC.md 7). Closing a TCP socket whose receive queue still holds unread
// bytes makes the kernel send RST instead of FIN, and a peer that is still
// writing (a PUB over max_payload, a pipeline behind a bad frame) then sees
// "connection reset" on its next write or read, often before it has read
// the -ERR that says why. So the server closes in two steps, as HTTP
// servers do: it gives the connection's subscriptions and leases back at
// once, half-closes (the peer reads -ERR, then EOF), reads and discards
// whatever still arrives, and closes the socket when the peer closes its
// side or after lingerTime, whichever comes first.

import (
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// lingerTime bounds how long a failed connection's socket stays half-closed
// while its input is discarded.
const lingerTime = 2 * time.Second

// release gives back the connection's subscriptions, pending polls and
// durable leases; the connection stays registered until teardown.
// Idempotent; any goroutine.
func (c *client) release() { c.releaseTo(stateReleased) }

// releaseTo moves the connection to next (released or closed) and, the
// first time either is entered, gives back what release gives back. It
// reports whether it moved the state (false: next or a later state was
// reached before).
func (c *client) releaseTo(next connState) bool {
	c.answers.mu.Lock()
	c.mu.Lock()
	prev, ok := c.state.to(next)
	if !ok || prev >= stateReleased {
		c.mu.Unlock()
		c.answers.mu.Unlock()
		return ok
	}
	subs := c.subs
	c.subs = nil
	c.answers.closeLocked()
	c.wr.writeAcks = nil
	c.wr.out.release(&c.srv.outBufs)
	c.mu.Unlock()
	c.answers.mu.Unlock()
	c.cancel()
	for _, s := range subs {
		c.srv.dropSub(s)
	}
	c.srv.releaseDurable(c)
	return true
}

// startLinger marks the connection half-closed at now and releases it.
func (c *client) startLinger(now time.Time) {
	c.lingerUntil.Store(now.Add(lingerTime).UnixNano())
	c.release()
}

// lingerDone reports whether the connection lingers and its time is up.
func (c *client) lingerDone(now time.Time) bool {
	u := c.lingerUntil.Load()
	return u != 0 && now.UnixNano() >= u
}

// closeAfterFlush is the gnet answer to a closing connection whose last
// output was handed over: half-close and linger, or close when lingering is
// over (or cannot start: output the peer has not taken yet, or a failed
// shutdown, closes at once as before).
func (h *gnetHandler) closeAfterFlush(c gnet.Conn, cl *client) gnet.Action {
	now := time.Now()
	if cl.lingerUntil.Load() != 0 {
		if cl.lingerDone(now) {
			return gnet.Close
		}
		return gnet.None
	}
	if c.OutboundBuffered() > 0 {
		_ = c.Flush()
	}
	if c.OutboundBuffered() > 0 {
		return gnet.Close
	}
	if err := unix.Shutdown(c.Fd(), unix.SHUT_WR); err != nil {
		return gnet.Close
	}
	cl.startLinger(now)
	return gnet.None
}

// lingerNet is the answer of a goroutine-served connection (TLS, or moved
// off gnet) to the same: close_notify (TLS) and a TCP half-close, then the
// reader discards input until EOF or the deadline. It reports false when
// the connection must be shut at once.
func lingerNet(tc *netConn, conn streamConn, cl *client) bool {
	now := time.Now()
	if err := conn.CloseWrite(); err != nil {
		return false
	}
	if tcp, ok := tc.raw.(*net.TCPConn); ok && tc.tls {
		if err := tcp.CloseWrite(); err != nil {
			return false
		}
	}
	if err := conn.SetReadDeadline(now.Add(lingerTime)); err != nil {
		return false
	}
	cl.startLinger(now)
	return true
}
