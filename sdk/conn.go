package fibril

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// Version is this client's version, sent in CONNECT.
const Version = "0.1.0"

// ServerInfo is the server's INFO (SPEC.md section 11).
type ServerInfo = protocol.Info

type connState uint8

const (
	stateConnected connState = iota + 1
	stateReconnecting
	stateClosed
)

// Conn is a connection to a Fibril server. It is safe for concurrent use.
// It reconnects by itself (see ReconnectPolicy) until Close.
type Conn struct {
	cfg        config
	addr       string
	serverName string // for TLS verification

	mu          sync.Mutex // guards everything below; never held across I/O
	tr          *transport // nil while disconnected
	fifo        []*request // requests awaiting their answer, in send order
	subs        map[uint64]*Subscription
	nextSID     uint64
	info        ServerInfo
	state       connState
	closeErr    error
	replayBytes int // encoded bytes queued while disconnected
	reconnects  int
	acks        []queuedAck // AckAsync calls not written yet (ackcoalesce.go)

	maxPayload atomic.Int64  // info.MaxPayload, read by every publish without c.mu
	window     *window       // one token per unconfirmed publish (window.go)
	frames     chan []byte   // encoded publishes whose confirm came, for reuse (framepool.go)
	closed     chan struct{} // closed by Close
	wg         sync.WaitGroup
}

// transport is one TCP/TLS connection. A Conn has at most one at a time.
type transport struct {
	nc       net.Conn
	fr       *frameReader
	out      []byte // pending output; guarded by Conn.mu
	spare    []byte // the writer's other buffer; guarded by Conn.mu
	kick     chan struct{}
	done     chan struct{} // closed when the transport is torn down
	pingsOut int           // guarded by Conn.mu
}

// Connect dials the server at rawURL (fibril://host:port, nats://host:port,
// tls://host:port or host:port), performs the handshake and returns a
// connected Conn. It blocks until connected, ctx is done, or the handshake
// fails (it does not retry the first connection).
func Connect(ctx context.Context, rawURL string, opts ...Option) (*Conn, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("fibril: %w: %w", ErrInvalidArgument, err)
		}
	}
	addr, useTLS, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if useTLS && cfg.tls == nil {
		cfg.tls = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if u, p, ok := urlUser(rawURL); ok && cfg.user == "" && cfg.token == "" {
		if p == "" {
			cfg.token = u
		} else {
			cfg.user, cfg.pass = u, p
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("fibril: %w: %w", ErrInvalidArgument, err)
	}
	host, _, _ := net.SplitHostPort(addr)
	c := &Conn{cfg: cfg, addr: addr, serverName: host, subs: map[uint64]*Subscription{}, closed: make(chan struct{})}
	nc, fr, info, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	n := info.MaxUnconfirmed
	if n <= 0 {
		n = 1024
	}
	if cfg.maxInFlightPb > 0 && cfg.maxInFlightPb < n {
		n = cfg.maxInFlightPb
	}
	c.window = newWindow(n)
	c.frames = make(chan []byte, n)
	c.mu.Lock()
	c.setInfoLocked(info)
	c.state = stateConnected
	c.install(nc, fr)
	c.mu.Unlock()
	return c, nil
}

func parseURL(raw string) (addr string, useTLS bool, err error) {
	if !strings.Contains(raw, "://") {
		raw = "fibril://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", false, fmt.Errorf("fibril: %w: url %q: %w", ErrInvalidArgument, raw, err)
	}
	switch u.Scheme {
	case "fibril", "nats", "tcp":
	case "tls", "fibrils":
		useTLS = true
	default:
		return "", false, fmt.Errorf("fibril: %w: url scheme %q", ErrInvalidArgument, u.Scheme)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "4222"
	}
	return net.JoinHostPort(host, port), useTLS, nil
}

func urlUser(raw string) (user, pass string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return "", "", false
	}
	p, _ := u.User.Password()
	return u.User.Username(), p, true
}

// dial opens one connection and completes the handshake: INFO, CONNECT,
// +OK. It holds no lock.
func (c *Conn) dial(ctx context.Context) (net.Conn, *frameReader, ServerInfo, error) {
	var info ServerInfo
	ctx, cancel := context.WithTimeout(ctx, c.cfg.dialTimeout)
	defer cancel()
	d := net.Dialer{}
	nc, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, nil, info, fmt.Errorf("fibril: dial %s: %w", c.addr, err)
	}
	fail := func(err error) (net.Conn, *frameReader, ServerInfo, error) {
		nc.Close()
		return nil, nil, info, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	fr := newFrameReader(nc)
	f, err := fr.next()
	if err != nil {
		return fail(fmt.Errorf("fibril: reading INFO from %s: %w", c.addr, err))
	}
	if f.kind != fInfo {
		return fail(fmt.Errorf("%w: first frame is not INFO", ErrProtocol))
	}
	if info, err = protocol.ParseInfo([]byte(f.arg)); err != nil {
		return fail(fmt.Errorf("%w: INFO: %w", ErrProtocol, err))
	}
	// TLS as in NATS: INFO in clear text, then the client's handshake
	if c.cfg.tls != nil || info.TLSRequired {
		if fr.start < fr.end {
			return fail(fmt.Errorf("%w: clear-text bytes after INFO on a TLS connection", ErrProtocol))
		}
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.cfg.tls != nil {
			tc = c.cfg.tls.Clone()
		}
		if tc.ServerName == "" {
			tc.ServerName = c.serverName
		}
		tlsConn := tls.Client(nc, tc)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			return fail(fmt.Errorf("fibril: tls handshake with %s: %w", c.addr, err))
		}
		nc = tlsConn
		fr = newFrameReader(nc)
	}
	fr.setMaxPayload(int(info.MaxPayload))
	if info.Fibril < 1 {
		return fail(fmt.Errorf("%w: server at %s does not speak fibril (INFO has no \"fibril\")", ErrProtocol, c.addr))
	}
	if c.cfg.crc && !info.CRC {
		return fail(fmt.Errorf("%w: server at %s does not offer CRC mode (use WithCRC(false))", ErrProtocol, c.addr))
	}
	line, err := c.connectLine()
	if err != nil {
		return fail(fmt.Errorf("fibril: encoding CONNECT: %w", err))
	}
	if _, err := nc.Write(line); err != nil {
		return fail(fmt.Errorf("fibril: sending CONNECT: %w", err))
	}
	fr.setCRC(c.cfg.crc)
	for {
		f, err := fr.next()
		if err != nil {
			return fail(fmt.Errorf("fibril: handshake with %s: %w", c.addr, err))
		}
		switch f.kind {
		case fOK:
			_ = nc.SetDeadline(time.Time{})
			return nc, fr, info, nil
		case fErr:
			return fail(fmt.Errorf("fibril: CONNECT refused: %w", protocol.ParseErrText([]byte(f.arg))))
		case fPing:
			if _, err := nc.Write([]byte("PONG\r\n")); err != nil {
				return fail(err)
			}
		case fInfo:
			// an INFO update before +OK: keep the newest
			if i2, err := protocol.ParseInfo([]byte(f.arg)); err == nil {
				info = i2
			}
		default:
			return fail(fmt.Errorf("%w: unexpected frame during handshake", ErrProtocol))
		}
	}
}

func (c *Conn) connectLine() ([]byte, error) {
	cn := protocol.Connect{
		Lang: "go", Version: Version, Protocol: 1, Headers: true,
		Name: c.cfg.name, AuthToken: c.cfg.token, User: c.cfg.user, Pass: c.cfg.pass,
		Fibril: 1, CRC: c.cfg.crc, Confirm: true,
	}
	return protocol.AppendConnect(nil, &cn)
}

// install makes nc the live transport and starts its goroutines. Caller holds
// c.mu.
func (c *Conn) install(nc net.Conn, fr *frameReader) *transport {
	t := &transport{nc: nc, fr: fr, kick: make(chan struct{}, 1), done: make(chan struct{})}
	c.tr = t
	c.wg.Add(2)
	go c.writeLoop(t)
	go c.readLoop(t)
	if c.cfg.heartbeat > 0 {
		c.wg.Add(1)
		go c.heartbeatLoop(t)
	}
	return t
}

// setInfoLocked adopts the server's INFO. Caller holds c.mu.
func (c *Conn) setInfoLocked(info ServerInfo) {
	c.info = info
	c.maxPayload.Store(info.MaxPayload)
}

// Info returns the INFO of the server this Conn is (or was last) connected to.
func (c *Conn) Info() ServerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info
}

// Reconnects returns how many times this Conn has reconnected.
func (c *Conn) Reconnects() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reconnects
}

// IsConnected reports whether a transport is up right now.
func (c *Conn) IsConnected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state == stateConnected
}

// Flush blocks until the server has answered every command sent before it
// (it sends PING and waits for the PONG), or ctx is done.
func (c *Conn) Flush(ctx context.Context) error {
	_, err := c.roundTrip(ctx, reqPing, []byte("PING\r\n"))
	return err
}

// Close closes the connection at once: every pending request fails with
// ErrClosed and consumers stop. Use Drain to wait for confirms first. A second
// Close returns nil.
func (c *Conn) Close() error {
	c.closeWith(ErrClosed)
	c.wg.Wait()
	return nil
}

// closeReason returns why the Conn closed (wrapping ErrClosed).
func (c *Conn) closeReason() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeErr == nil {
		return ErrClosed
	}
	return c.closeErr
}

// Drain waits until every publish sent so far is confirmed (or ctx is done),
// then closes the Conn.
func (c *Conn) Drain(ctx context.Context) error {
	err := c.Flush(ctx)
	c.Close()
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

func (c *Conn) closeWith(why error) {
	c.mu.Lock()
	cleanup := c.closeLocked(why)
	c.mu.Unlock()
	cleanup()
}

// closeLocked marks the Conn closed for why (caller holds c.mu) and returns
// what is left to do once c.mu is released: close the transport, fail what
// was pending, end the subscriptions. Nothing can see the Conn half closed.
func (c *Conn) closeLocked(why error) (cleanup func()) {
	if c.state == stateClosed {
		return func() {}
	}
	c.state = stateClosed
	c.closeErr = why
	close(c.closed)
	t := c.tr
	c.tr = nil
	pending := c.fifo
	c.fifo = nil
	subs := c.subs
	c.subs = map[uint64]*Subscription{}
	acks := c.takeAcksLocked()
	return func() {
		if t != nil {
			close(t.done)
			t.nc.Close()
		}
		for _, r := range pending {
			c.finish(r, why)
		}
		c.acksAnswered(acks, why)
		for _, s := range subs {
			s.close(why)
		}
	}
}

// writeLoop moves t.out to the socket. One per transport.
func (c *Conn) writeLoop(t *transport) {
	defer c.wg.Done()
	for {
		select {
		case <-t.kick:
		case <-t.done:
			return
		}
		c.mu.Lock()
		if c.tr == t {
			c.flushAcksLocked(t)
		}
		if len(t.out) == 0 {
			c.mu.Unlock()
			continue
		}
		// swap buffers; spare is nil while buf is on the wire, so the two
		// can never alias
		buf := t.out
		t.out, t.spare = t.spare[:0], nil
		c.mu.Unlock()
		if _, err := t.nc.Write(buf); err != nil {
			c.lost(t, fmt.Errorf("fibril: write: %w", err))
			return
		}
		c.mu.Lock()
		// keep the buffer unless it is huge; a full publish window (1024
		// unconfirmed 1 KiB publishes) must fit, or every swap regrows it
		if cap(buf) <= 4<<20 {
			t.spare = buf[:0]
		}
		c.mu.Unlock()
	}
}

// heartbeatLoop pings the server and declares it dead after maxPingsOut
// unanswered pings. A waiting POLL holds back the PONG (strict answers), so
// the check is skipped while a POLL is pending whose wait (plus one
// interval) has not passed; a Fetcher keeps POLLs pending all the time, so
// a POLL past its wait must not excuse a silent server.
func (c *Conn) heartbeatLoop(t *transport) {
	defer c.wg.Done()
	tk := time.NewTicker(c.cfg.heartbeat)
	defer tk.Stop()
	for {
		select {
		case <-tk.C:
		case <-t.done:
			return
		}
		c.mu.Lock()
		if c.tr != t {
			c.mu.Unlock()
			return
		}
		polling := false
		now := time.Now()
		for _, r := range c.fifo {
			polling = polling || r.kind == reqPoll && now.Before(r.waitUntil.Add(c.cfg.heartbeat))
		}
		if !polling && t.pingsOut >= c.cfg.maxPingsOut {
			c.mu.Unlock()
			c.lost(t, fmt.Errorf("fibril: %d pings unanswered: stale connection", t.pingsOut))
			return
		}
		t.pingsOut++
		r := newRequest(reqPing, nil)
		c.fifo = append(c.fifo, r)
		c.writeLocked(t, []byte("PING\r\n"))
		c.mu.Unlock()
	}
}

// writeLocked queues bytes on t and wakes its writer. Caller holds c.mu.
func (c *Conn) writeLocked(t *transport, b []byte) {
	t.out = append(t.out, b...)
	select {
	case t.kick <- struct{}{}:
	default:
	}
}
