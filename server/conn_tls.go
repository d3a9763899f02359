package server

// The TLS listener (SPEC.md "TLS"). gnet has no TLS, so TLS connections are
// served by crypto/tls over net from the standard library: one reader
// goroutine feeds the same client.feed as the gnet path, one writer
// goroutine drains the same outbox. As in NATS, the server first sends INFO
// in clear text (tls_required: true), then the client starts the TLS
// handshake; everything after it is encrypted. Stock NATS clients using a
// tls:// URL work unchanged.

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

// tlsConn is the transport of one TLS connection.
type tlsConn struct {
	raw    net.Conn
	remote string
	wakeCh chan struct{} // capacity 1: a pending flush request
	done   chan struct{}
	once   sync.Once
}

func (t *tlsConn) wake() {
	select {
	case t.wakeCh <- struct{}{}:
	default:
	}
}
func (t *tlsConn) close()             { t.wake() }
func (t *tlsConn) remoteAddr() string { return t.remote }
func (t *tlsConn) isTLS() bool        { return true }
func (t *tlsConn) shut() {
	t.once.Do(func() {
		close(t.done)
		_ = t.raw.Close()
	})
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
	tc := &tlsConn{raw: nc, remote: nc.RemoteAddr().String(), wakeCh: make(chan struct{}, 1), done: make(chan struct{})}
	cl, refuse := s.admit(tc)
	if cl == nil {
		_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = nc.Write(refuse)
		_ = nc.Close()
		return
	}
	defer cl.teardown()
	defer tc.shut()
	_ = nc.SetWriteDeadline(time.Now().Add(s.opts.WriteDeadline))
	if _, err := nc.Write(s.infoLine(cl, true)); err != nil {
		return
	}
	conn := tls.Server(nc, tl.cfg)
	_ = conn.SetDeadline(time.Now().Add(s.opts.AuthTimeout + time.Second))
	if err := conn.Handshake(); err != nil {
		cl.log.Info("tls handshake failed", "err", err)
		return
	}
	_ = conn.SetDeadline(time.Time{})
	tl.wg.Add(1)
	go func() {
		defer tl.wg.Done()
		tl.writer(conn, tc, cl)
	}()

	buf := make([]byte, 0, 32<<10)
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= s.opts.MaxInputBuffer {
				// The writer sends the -ERR and half-closes; the input
				// from here on is discarded below.
				cl.fail(protocol.CodeMaxPayload, fmt.Sprintf("input buffer over %d bytes", s.opts.MaxInputBuffer))
				buf = buf[:0]
				continue
			}
			nb := make([]byte, len(buf), min(2*cap(buf), s.opts.MaxInputBuffer))
			copy(nb, buf)
			buf = nb
		}
		// A client that does not read its answers is not parsed further
		// until its output drains (the writer is blocked meanwhile).
		stalled := false
		for (cl.outputOver(0) || cl.laneStall.Load()) && !cl.isClosing() {
			stalled = true
			select {
			case <-tc.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		if stalled && len(buf) > 0 && !cl.isClosing() {
			// Parse what arrived while parsing waited before reading more.
			used := cl.feed(buf)
			rest := copy(buf, buf[used:])
			buf = buf[:rest]
			continue
		}
		n, err := conn.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case cl.isClosing():
			buf = buf[:0] // lingering: discard
		case n > 0:
			used := cl.feed(buf)
			rest := copy(buf, buf[used:])
			buf = buf[:rest]
		}
		if err != nil {
			return
		}
	}
}

// writer drains the outbox to the TLS connection until it closes.
func (tl *tlsListener) writer(conn *tls.Conn, tc *tlsConn, cl *client) {
	for {
		select {
		case <-tc.done:
			return
		case <-tc.wakeCh:
		}
		out, closeAfter := cl.takeOut()
		if len(out) > 0 {
			// The bytes of a write in progress still count as pending.
			acks, _ := cl.afterWrite(len(out), time.Now())
			cl.settleWritten(acks)
			_ = conn.SetWriteDeadline(time.Now().Add(tl.s.opts.WriteDeadline))
			if _, err := conn.Write(out); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					cl.slowConsumer("write deadline " + tl.s.opts.WriteDeadline.String() + " passed")
				}
				tc.shut()
				return
			}
		}
		tl.s.outBufs.put(out)
		acks, _ := cl.afterWrite(0, time.Now())
		cl.settleWritten(acks)
		if closeAfter {
			// The reader ends the connection when the peer closes or the
			// lingering deadline passes (linger.go).
			if !lingerTLS(tc, conn, cl) {
				tc.shut()
			}
			return
		}
	}
}
