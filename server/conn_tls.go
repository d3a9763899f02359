package server

// The TLS listener (SPEC.md "TLS"). gnet has no TLS, so TLS connections are
// served by crypto/tls over net from the standard library: one reader
// goroutine feeds the same client.feed as the gnet path, one writer
// goroutine drains the same outbox. As in NATS, the server first sends INFO
// in clear text (tls_required: true), then the client starts the TLS
// handshake; everything after it is encrypted. Stock NATS clients using a
// tls:// URL work unchanged. With Options.TLSHandshakeFirst a client may
// also start with the handshake (NATS "handshake_first", `nats
// --tlsfirst`); INFO then comes first inside the TLS session.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

type tlsListener struct {
	s    *Server
	ln   net.Listener
	cfg  *tls.Config
	wg   sync.WaitGroup
	mu   sync.Mutex
	open map[net.Conn]struct{}
}

// netConn is the transport of a connection served by goroutines over the
// standard library: a TLS connection, or a plain one moved off its gnet
// event loop so it can stop being read (conn_moved.go).
type netConn struct {
	raw    net.Conn
	remote string
	tls    bool
	wakeCh chan struct{} // capacity 1: a pending flush request
	done   chan struct{}
	once   sync.Once
}

func newNetConn(raw net.Conn, remote string, isTLS bool) *netConn {
	return &netConn{raw: raw, remote: remote, tls: isTLS, wakeCh: make(chan struct{}, 1), done: make(chan struct{})}
}

func (t *netConn) wake() {
	select {
	case t.wakeCh <- struct{}{}:
	default:
	}
}
func (t *netConn) close()             { t.wake() }
func (t *netConn) remoteAddr() string { return t.remote }
func (t *netConn) isTLS() bool        { return t.tls }
func (t *netConn) shut() {
	t.once.Do(func() {
		close(t.done)
		_ = t.raw.Close()
	})
}

// streamConn is what the reader and writer goroutines need of a
// connection: *tls.Conn and *net.TCPConn both are one.
type streamConn interface {
	net.Conn
	CloseWrite() error
}

func (s *Server) listenTLS() (*tlsListener, error) {
	cfg := s.opts.TLSConfig
	if cfg == nil {
		cert, err := tls.LoadX509KeyPair(s.opts.TLSCertFile, s.opts.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("server: load TLS key pair: %w", err)
		}
		cfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", s.opts.TLSListen)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrListen, s.opts.TLSListen, err)
	}
	tl := &tlsListener{s: s, ln: ln, cfg: cfg, open: make(map[net.Conn]struct{})}
	tl.wg.Add(1)
	go tl.accept()
	return tl, nil
}

func (tl *tlsListener) accept() {
	defer tl.wg.Done()
	for {
		nc, err := tl.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			tl.s.log.Warn("tls accept", "err", err)
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE: do not spin
			continue
		}
		tl.mu.Lock()
		tl.open[nc] = struct{}{}
		tl.mu.Unlock()
		tl.wg.Add(1)
		go func() {
			defer tl.wg.Done()
			tl.serve(nc)
			tl.mu.Lock()
			delete(tl.open, nc)
			tl.mu.Unlock()
		}()
	}
}

// stop closes the listener and every TLS connection and waits for their
// goroutines.
func (tl *tlsListener) stop() {
	_ = tl.ln.Close()
	tl.mu.Lock()
	for nc := range tl.open {
		_ = nc.Close()
	}
	tl.mu.Unlock()
	tl.wg.Wait()
}

func (tl *tlsListener) serve(nc net.Conn) {
	s := tl.s
	tc := newNetConn(nc, nc.RemoteAddr().String(), true)
	cl, refuse := s.admit(tc)
	if cl == nil {
		_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = nc.Write(refuse)
		_ = nc.Close()
		return
	}
	defer cl.teardown()
	defer tc.shut()
	raw, first, err := tl.detectTLSFirst(nc)
	if err != nil {
		return
	}
	if !first {
		_ = nc.SetWriteDeadline(time.Now().Add(s.opts.WriteDeadline))
		if _, err := nc.Write(s.infoLine(cl, true)); err != nil {
			return
		}
	}
	conn := tls.Server(raw, tl.cfg)
	_ = conn.SetDeadline(time.Now().Add(s.opts.AuthTimeout + time.Second))
	if err := conn.Handshake(); err != nil {
		cl.log.Info("tls handshake failed", "err", err, "tls_first", first)
		return
	}
	if first {
		// TLS first: INFO is the first thing sent inside the session.
		if _, err := conn.Write(s.infoLine(cl, true)); err != nil {
			return
		}
	}
	_ = conn.SetDeadline(time.Time{})
	tl.wg.Add(1)
	go func() {
		defer tl.wg.Done()
		s.writeLoop(conn, tc, cl)
	}()
	s.readLoop(conn, tc, cl, make([]byte, 0, 32<<10))
}

// readLoop feeds what conn delivers to cl until the connection ends. buf
// holds input already received and not yet parsed (its capacity is the
// first read buffer). While cl must not be parsed (its output is over
// MaxPending, or its lane is full) nothing is read, so TCP slows the peer.
func (s *Server) readLoop(conn net.Conn, tc *netConn, cl *client, buf []byte) {
	// again: buf may hold whole frames not parsed yet (new input, or a
	// parse that stopped at a stall); parsed before reading more, so a
	// stall that ends never leaves commands waiting for more input.
	again := len(buf) > 0
	for {
		// A client that does not read its answers, whose lane is full or
		// whose subscriber is slow (stall.go) is not parsed further until
		// that clears; nothing is read meanwhile.
		for (cl.outputOver(0) || cl.lane.stall.Load() || cl.consumerStall()) && !cl.isClosing() {
			select {
			case <-tc.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		if again && len(buf) > 0 && !cl.isClosing() {
			used := cl.feed(buf)
			rest := copy(buf, buf[used:])
			buf = buf[:rest]
			again = used > 0
			continue
		}
		// Grown only here, before a read: a full buffer of whole frames
		// is parsed first, never grown.
		if len(buf) == cap(buf) {
			if len(buf) >= s.opts.MaxInputBuffer {
				// One frame cannot be over MaxInputBuffer (validate): the
				// writer sends the -ERR and half-closes; the input from
				// here on is discarded below.
				cl.fail(protocol.CodeMaxPayload, fmt.Sprintf("input buffer over %d bytes", s.opts.MaxInputBuffer))
				buf = buf[:0]
			} else {
				nb := make([]byte, len(buf), min(2*cap(buf), s.opts.MaxInputBuffer))
				copy(nb, buf)
				buf = nb
			}
		}
		n, err := conn.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case cl.isClosing():
			buf = buf[:0] // lingering: discard
		case n > 0:
			again = true
		}
		if err != nil {
			if again && len(buf) > 0 && !cl.isClosing() {
				cl.feed(buf) // what came with the end of the stream
			}
			return
		}
	}
}

// tlsFirstWait is how long a TLS connection may take to start a TLS
// handshake before the server sends INFO in clear text (with
// Options.TLSHandshakeFirst; nats-server's handshake_first "auto" waits
// as long). A client that waits for INFO sends nothing first.
const tlsFirstWait = 50 * time.Millisecond

// detectTLSFirst tells a client that starts with the TLS handshake (a
// ClientHello record, first byte 0x16) from one that waits for INFO. It
// returns the connection to run TLS over, with any byte it read put back.
// Without Options.TLSHandshakeFirst it reads nothing.
func (tl *tlsListener) detectTLSFirst(nc net.Conn) (net.Conn, bool, error) {
	if !tl.s.opts.TLSHandshakeFirst {
		return nc, false, nil
	}
	_ = nc.SetReadDeadline(time.Now().Add(tlsFirstWait))
	var b [1]byte
	n, err := nc.Read(b[:])
	_ = nc.SetReadDeadline(time.Time{})
	if n == 0 {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nc, false, nil // waits for INFO: the usual order
		}
		return nil, false, fmt.Errorf("server: read first byte: %w", err)
	}
	return &prefixConn{Conn: nc, pre: b[:n]}, b[0] == 0x16, nil
}

// prefixConn is a net.Conn whose first reads return pre.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// writeLoop drains the outbox to conn until the connection closes.
func (s *Server) writeLoop(conn streamConn, tc *netConn, cl *client) {
	var out [][]byte
	var vec net.Buffers
	for {
		select {
		case <-tc.done:
			return
		case <-tc.wakeCh:
		}
		var n int
		var closeAfter bool
		out, n, closeAfter = cl.takeOut(out[:0], int(^uint(0)>>1))
		if n > 0 {
			// The bytes of a write in progress still count as pending.
			acks, _ := cl.afterWrite(n, time.Now())
			cl.settleWritten(acks)
			_ = conn.SetWriteDeadline(time.Now().Add(s.opts.WriteDeadline))
			// WriteTo consumes its argument: it gets a copy of the list.
			vec = append(vec[:0], out...)
			if _, err := vec.WriteTo(conn); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					cl.slowConsumer("write deadline " + s.opts.WriteDeadline.String() + " passed")
				}
				tc.shut()
				return
			}
		}
		s.outBufs.putAll(out)
		clear(vec[:cap(vec)])
		acks, _ := cl.afterWrite(0, time.Now())
		cl.settleWritten(acks)
		if closeAfter {
			// The reader ends the connection when the peer closes or the
			// lingering deadline passes (linger.go).
			if !lingerNet(tc, conn, cl) {
				tc.shut()
			}
			return
		}
	}
}
