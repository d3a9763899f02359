package server

import (
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// gnetHandler binds gnet's callbacks to the server. Every callback except
// OnTick runs on the event loop that owns the connection and must not block.
type gnetHandler struct {
	gnet.BuiltinEventEngine
	s      *Server
	booted chan struct{}
	addr   atomic.Pointer[net.TCPAddr]
}

// gnetConn is the transport of a connection served by a gnet event loop,
// or, once moved is set, by goroutines (conn_moved.go).
type gnetConn struct {
	c      gnet.Conn
	remote string
	moved  atomic.Pointer[netConn]
}

func (g *gnetConn) wake() {
	if m := g.moved.Load(); m != nil {
		m.wake()
		return
	}
	_ = g.c.Wake(nil)
}
func (g *gnetConn) close()             { g.wake() }
func (g *gnetConn) remoteAddr() string { return g.remote }
func (g *gnetConn) isTLS() bool        { return false }

// OnBoot records the engine and the bound address (port 0 resolves here).
func (h *gnetHandler) OnBoot(eng gnet.Engine) gnet.Action {
	h.s.eng.Store(&eng)
	if fd, err := eng.Dup(); err == nil {
		if sa, err := unix.Getsockname(fd); err == nil {
			switch a := sa.(type) {
			case *unix.SockaddrInet4:
				h.addr.Store(&net.TCPAddr{IP: net.IP(a.Addr[:]).To16(), Port: a.Port})
			case *unix.SockaddrInet6:
				h.addr.Store(&net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port})
			}
		}
		_ = unix.Close(fd)
	}
	close(h.booted)
	return gnet.None
}

// OnOpen admits the connection (or refuses it past MaxConnections or while
// draining) and sends INFO.
func (h *gnetHandler) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	remote := "?"
	if ra := c.RemoteAddr(); ra != nil {
		remote = ra.String()
	}
	gc := &gnetConn{c: c, remote: remote}
	cl, refuse := h.s.admit(gc)
	if cl == nil {
		return refuse, gnet.Close
	}
	c.SetContext(cl)
	if h.s.opts.authRequired() {
		if err := unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_RCVLOWAT, preAuthLowat); err == nil {
			cl.login.lowat.Store(lowatRaised)
		}
	}
	return h.s.infoLine(cl, false), gnet.None
}

// Pre-auth reads (SPEC.md 3; issue 23, slowloris). All connections of an
// event loop share its thread, so a connection that sends its CONNECT a
// byte at a time used to cost the loop a wakeup, a read and a parse per
// byte, ahead of the logged-in clients' traffic on the same loop (1,000
// of them, a byte each per 100 ms, took a logged-in client to 70 % of its
// rate). Until its first read, the socket of a connection that must
// authenticate has SO_RCVLOWAT preAuthLowat: the kernel wakes the loop
// only once that many bytes have arrived (or the peer closed). Every
// CONNECT that carries a credential is longer, so no login waits for it;
// the first read sets it back to 1, so nothing read after it waits either.
// A connection that sent fewer bytes, in all, is read once its auth
// timeout is due by the next tick (heartbeat.go): a short command before
// CONNECT is then answered auth_violation as SPEC.md 3 says, late.
const preAuthLowat = 16

// The states of connLogin.lowat.
const (
	lowatOff    int32 = iota // SO_RCVLOWAT 1: every byte is read as it comes
	lowatRaised              // SO_RCVLOWAT preAuthLowat, nothing read yet
	lowatRescue              // raised, and the heartbeat asks for it lowered
)

// lowerLowat sets the socket's SO_RCVLOWAT back to 1 after the first read
// (or when the heartbeat asks): the kernel then wakes the loop for what is
// already queued, if anything. Event loop only.
func lowerLowat(c gnet.Conn, cl *client) {
	if cl.login.lowat.Swap(lowatOff) != lowatOff {
		_ = unix.SetsockoptInt(c.Fd(), unix.SOL_SOCKET, unix.SO_RCVLOWAT, 1)
	}
}

// OnTraffic parses what arrived (or only flushes, after a Wake) and writes
// the outbox. Peek's slice is used only inside this call.
func (h *gnetHandler) OnTraffic(c gnet.Conn) gnet.Action {
	cl, ok := c.Context().(*client)
	if !ok {
		return gnet.Close
	}
	cl.beginInput()
	if !cl.isReady() {
		h.s.stats.preAuthWakeups.Add(1)
	}
	if lw := cl.login.lowat.Load(); lw == lowatRescue || lw == lowatRaised && c.InboundBuffered() > 0 {
		lowerLowat(c, cl)
	}
	// A password check that finished off the loop is applied first; while
	// one runs, input stays buffered (bounded below).
	resumed := cl.resumeConnect()
	// A client that does not read its answers stops being parsed (its
	// input then fills up to MaxInputBuffer); the ticker wakes it to
	// check again.
	stalled := cl.outputOver(c.OutboundBuffered())
	if n := c.InboundBuffered(); n > 0 {
		switch {
		case cl.isClosing():
			_, _ = c.Discard(n)
		case resumed && !stalled:
			buf, err := c.Peek(n)
			if err == nil {
				// gnet's Discard(0) discards everything: call it only
				// when something was consumed.
				if used := cl.feed(buf); used > 0 {
					_, _ = c.Discard(used)
				}
			}
		}
		if shouldMove(c, cl) {
			gc, _ := cl.tr.(*gnetConn)
			if gc == nil {
				return gnet.Close
			}
			err := h.moveOff(c, cl, gc)
			if err == nil {
				return gnet.Close // the socket lives on in the moved connection
			}
			cl.log.Warn("cannot move a waiting connection off its event loop", "err", err)
		}
		if left := c.InboundBuffered(); left > h.s.opts.MaxInputBuffer && !cl.isClosing() {
			cl.fail(protocol.CodeMaxPayload, fmt.Sprintf("input buffer over %d bytes", h.s.opts.MaxInputBuffer))
		}
	}
	return h.flush(c, cl)
}

func (h *gnetHandler) flush(c gnet.Conn, cl *client) gnet.Action {
	// gnet holds at most transportWindow of output (outbuf.go); the rest
	// waits in the outbox for the drain poll.
	out, n, closeAfter := cl.takeOut(cl.wr.flushBufs[:0], transportWindow-c.OutboundBuffered())
	if n > 0 {
		// gnet writes what the socket takes at once and copies the rest
		// into its own outbound buffer, so out is free again after the
		// write (in power-of-two pieces: outbuf.go).
		var err error
		if cl.wr.iov, err = writePieces(c, out, cl.wr.iov); err != nil {
			h.s.outBufs.putAll(out)
			return gnet.Close // unacked deliveries go back with the leases
		}
	}
	h.s.outBufs.putAll(out)
	cl.wr.flushBufs = out[:0]
	if c.OutboundBuffered() == 0 && cl.outboxLen() > 0 {
		// The socket took the window at once: the next one, before any
		// close (a closing connection's last bytes are its -ERR).
		cl.tr.wake()
		closeAfter = false
	}
	acks, stuck := cl.afterWrite(c.OutboundBuffered(), time.Now())
	cl.settleWritten(acks)
	if stuck && !closeAfter {
		// Nothing reached the socket for WriteDeadline: the -ERR could
		// not get through either, so close now (OnClose releases).
		cl.slowConsumer("write deadline " + h.s.opts.WriteDeadline.String() + " passed")
		return gnet.Close
	}
	if closeAfter {
		return h.closeAfterFlush(c, cl)
	}
	return gnet.None
}

// OnClose releases the connection's subscriptions and leases.
func (h *gnetHandler) OnClose(c gnet.Conn, _ error) gnet.Action {
	if cl, ok := c.Context().(*client); ok {
		if gc, _ := cl.tr.(*gnetConn); gc != nil && gc.moved.Load() != nil {
			return gnet.None // moved off gnet: the connection goes on
		}
		cl.teardown()
	}
	return gnet.None
}

// OnTick runs on its own goroutine: heartbeats and auth timeouts.
func (h *gnetHandler) OnTick() (time.Duration, gnet.Action) {
	return h.s.tick(time.Now()), gnet.None
}

// gnetLogger sends gnet's own logs to slog at debug level (errors at warn).
type gnetLogger struct{ s *Server }

func (l gnetLogger) Debugf(f string, a ...any) { l.s.log.Debug("gnet: " + fmt.Sprintf(f, a...)) }
func (l gnetLogger) Infof(f string, a ...any)  { l.s.log.Debug("gnet: " + fmt.Sprintf(f, a...)) }
func (l gnetLogger) Warnf(f string, a ...any)  { l.s.log.Warn("gnet: " + fmt.Sprintf(f, a...)) }
func (l gnetLogger) Errorf(f string, a ...any) { l.s.log.Warn("gnet: " + fmt.Sprintf(f, a...)) }
func (l gnetLogger) Fatalf(f string, a ...any) { l.s.log.Error("gnet: " + fmt.Sprintf(f, a...)) }
