package fibril

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
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

// Conn is a connection to a Fibril server, one of a list (see Connect). It
// is safe for concurrent use. It reconnects by itself, to the next server
// of the list (see ReconnectPolicy), until Close.
type Conn struct {
	cfg config

	mu          sync.Mutex // guards everything below; never held across I/O
	servers     serverList // where to connect (servers.go)
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
	sendSeq     uint64      // requests sent so far: each request's seq
	held        []*request  // publishes answered not_leader, in seq order (notleader.go)
	heldTimer   *time.Timer // armed while held is not empty and connected

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

// Connect dials the servers of rawURL, a comma-separated list of URLs
// (fibril://host:port, nats://host:port, tls://host:port or host:port; a
// tls:// URL turns TLS on for that server, user info in a URL is its
// credentials unless WithToken or WithUserPassword gives some), followed
// by those of WithServers. It tries them in order, performs the handshake
// with the first that answers and returns a connected Conn; the servers
// of each INFO's connect_urls join the list (see WithoutDiscovery). It
// blocks until connected, ctx is done, or every server has failed once (it
// does not retry the first connection); that error wraps ErrNoServers and
// each server's failure, naming each address.
func Connect(ctx context.Context, rawURL string, opts ...Option) (*Conn, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("fibril: %w: %w", ErrInvalidArgument, err)
		}
	}
	servers, err := parseServers(rawURL, cfg.servers)
	if err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("fibril: %w: %w", ErrInvalidArgument, err)
	}
	c := &Conn{cfg: cfg, servers: servers, subs: map[uint64]*Subscription{}, closed: make(chan struct{})}
	var failed noServersError
	for i, s := range servers.s {
		if i > 0 && ctx.Err() != nil {
			break // the rest would fail the same way
		}
		nc, fr, info, err := c.dial(ctx, s)
		if err != nil {
			failed.addrs, failed.errs = append(failed.addrs, s.addr), append(failed.errs, err)
			c.cfg.logger.Info("fibril: connect failed", "addr", s.addr, "err", err)
			continue
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
		c.servers.cur = i
		logDiscovered := c.setInfoLocked(info)
		c.state = stateConnected
		c.install(nc, fr)
		c.mu.Unlock()
		logDiscovered()
		return c, nil
	}
	return nil, &failed
}

// dial opens one connection to s and completes the handshake: INFO,
// CONNECT, +OK. It holds no lock.
func (c *Conn) dial(ctx context.Context, s server) (net.Conn, *frameReader, ServerInfo, error) {
	var info ServerInfo
	ctx, cancel := context.WithTimeout(ctx, c.cfg.dialTimeout)
	defer cancel()
	d := net.Dialer{}
	nc, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return nil, nil, info, fmt.Errorf("fibril: dial %s: %w", s.addr, err)
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
		return fail(fmt.Errorf("fibril: reading INFO from %s: %w", s.addr, err))
	}
	if f.kind != fInfo {
		return fail(fmt.Errorf("%w: first frame is not INFO", ErrProtocol))
	}
	if info, err = protocol.ParseInfo([]byte(f.arg)); err != nil {
		return fail(fmt.Errorf("%w: INFO: %w", ErrProtocol, err))
	}
	// TLS as in NATS: INFO in clear text, then the client's handshake
	if c.cfg.tls != nil || s.tls || info.TLSRequired {
		if fr.start < fr.end {
			return fail(fmt.Errorf("%w: clear-text bytes after INFO on a TLS connection", ErrProtocol))
		}
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.cfg.tls != nil {
			tc = c.cfg.tls.Clone()
		}
		if tc.ServerName == "" {
			tc.ServerName = s.host
		}
		tlsConn := tls.Client(nc, tc)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			return fail(fmt.Errorf("fibril: tls handshake with %s: %w", s.addr, err))
		}
		nc = tlsConn
		fr = newFrameReader(nc)
	}
	fr.setMaxPayload(int(info.MaxPayload))
	if info.Fibril < 1 {
		return fail(fmt.Errorf("%w: server at %s does not speak fibril (INFO has no \"fibril\")", ErrProtocol, s.addr))
	}
	if c.cfg.crc && !info.CRC {
		return fail(fmt.Errorf("%w: server at %s does not offer CRC mode (use WithCRC(false))", ErrProtocol, s.addr))
	}
	line, err := c.connectLine(s)
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
			return fail(fmt.Errorf("fibril: handshake with %s: %w", s.addr, err))
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

// connectLine encodes CONNECT for s: the credentials of WithToken or
// WithUserPassword, else those of s's URL (a user alone is a token).
func (c *Conn) connectLine(s server) ([]byte, error) {
	token, user, pass := c.cfg.token, c.cfg.user, c.cfg.pass
	if token == "" && user == "" && s.hasUser {
		if s.pass == "" {
			token = s.user
		} else {
			user, pass = s.user, s.pass
		}
	}
	cn := protocol.Connect{
		Lang: "go", Version: Version, Protocol: 1, Headers: true,
		Name: c.cfg.name, AuthToken: token, User: user, Pass: pass,
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

// setInfoLocked adopts the INFO of the server connected to and adds its
// connect_urls to the server list (unless WithoutDiscovery). Caller holds
// c.mu; it calls the returned func, which logs what was learnt, once c.mu
// is released.
func (c *Conn) setInfoLocked(info ServerInfo) (logAfter func()) {
	c.info = info
	c.maxPayload.Store(info.MaxPayload)
	if c.cfg.noDiscovery || len(info.ConnectURLs) == 0 {
		return func() {}
	}
	from := c.servers.s[c.servers.cur].addr
	added, bad := c.servers.discover(c.servers.cur, info.ConnectURLs)
	return func() {
		if len(added) > 0 {
			c.cfg.logger.Info("fibril: servers discovered", "from", from, "added", added)
		}
		if len(bad) > 0 {
			c.cfg.logger.Warn("fibril: connect_urls entries that are not host:port skipped", "from", from, "entries", bad)
		}
	}
}

// Servers returns the addresses of the server list: those given to
// Connect, then those discovered, in the order they are tried.
func (c *Conn) Servers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers.addrs()
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

// Drain waits until every publish sent so far is confirmed or has failed
// (those answered not_leader included, see Publish), or ctx is done, then
// closes the Conn.
func (c *Conn) Drain(ctx context.Context) error {
	err := c.Flush(ctx)
	if err == nil {
		err = c.waitResends(ctx)
	}
	c.Close()
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// waitResends waits until the publishes answered not_leader so far (held
// for a resend, or resent and unanswered) are finished, or ctx is done.
func (c *Conn) waitResends(ctx context.Context) error {
	c.mu.Lock()
	rs := slices.Clone(c.held)
	for _, r := range c.fifo {
		if r.kind == reqPub && r.nl != nil {
			rs = append(rs, r)
		}
	}
	c.mu.Unlock()
	for _, r := range rs {
		select {
		case <-r.done.wait():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
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
	pending := append(c.fifo, c.takeHeldLocked()...)
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
