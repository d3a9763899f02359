package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/forward"
	"github.com/fibrilmq/fibril/server/jsapi"
	"github.com/fibrilmq/fibril/server/metacat"
	"github.com/panjf2000/gnet/v2"
	"golang.org/x/crypto/bcrypt"
)

// Version is the server version reported in INFO.
const Version = "0.1.0"

// NATSVersion is the nats-server version INFO advertises: stock NATS
// clients enable features by it (nats.js serves its consumers API from
// 2.9.4), and what Fibril serves of the JetStream API is the 2.10 subset
// SPEC.md 16.2 lists.
const NATSVersion = "2.10.0"

// Errors returned by Run.
var (
	// ErrRunning is returned by Run when the server is already running or
	// has run: a Server runs once.
	ErrRunning = errors.New("server: Run called twice")
	// ErrListen wraps a failure to bind a listener.
	ErrListen = errors.New("server: listen failed")
)

// Server is one Fibril server. Create it with New and start it with Run.
type Server struct {
	opts Options
	log  *slog.Logger
	id   string

	subs     *sublist
	durable  durableEngine
	cluster  *clusterState // nil on a single node (cluster_opts.go)
	forwards *forward.Pool // a cluster's forwarding connections (forwarding.go)
	js       *jsapi.API    // the JetStream API (handle_js.go); nil without the engine
	stats    serverStats
	admin    *adminListener // nil unless Options.HTTPListen; set before Ready
	engine   atomic.Pointer[broker.Broker]

	nextCID atomic.Uint64
	ran     atomic.Bool
	eng     atomic.Pointer[gnet.Engine]

	mu       sync.Mutex
	clients  map[uint64]*client
	closed   closedConns // the last closed clients, for LookupConn
	draining bool

	ready chan struct{}
	// addr and tlsAddr are set once while starting; connections may read
	// them (INFO) while Run still runs, hence atomics.
	addr    atomic.Pointer[net.TCPAddr]
	tlsAddr atomic.Pointer[net.TCPAddr]

	// ids are the identities of opts.Users, by index (auth.go).
	ids []*access.Identity
	// dummyHash is compared against when CONNECT names an unknown user.
	dummyHash []byte
	// auth runs password checks (authqueue.go); nil until Run.
	auth *authQueue
	// creds remembers recently verified and refused passwords
	// (passwords.go); nil without Users.
	creds *credCache
	// outBufs recycles the connections' output buffers (outbuf.go).
	outBufs outPool
	// moved holds the connections moved off gnet (conn_moved.go).
	moved movedConns
}

// New validates a copy of opts and returns a server ready to Run. It binds
// nothing and opens no files; errors wrap ErrInvalidOptions.
func New(opts Options) (*Server, error) {
	o := opts
	o.Users = append([]User(nil), opts.Users...)
	o.AutoCreate = append([]string(nil), opts.AutoCreate...)
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.TLSConfig != nil {
		o.TLSConfig = o.TLSConfig.Clone()
	}
	var idb [8]byte
	_, _ = rand.Read(idb[:])
	s := &Server{
		opts:    o,
		id:      "F" + hex.EncodeToString(idb[:]),
		subs:    newSublist(),
		clients: make(map[uint64]*client),
		ready:   make(chan struct{}),
		ids:     identities(o.Users),
	}
	// Connection ids are the engine's owner ids, which the event log keeps
	// across restarts (a message's history names its consumers): start each
	// run's ids from the clock so a new run never reuses an old run's ids.
	s.nextCID.Store(uint64(time.Now().UnixMilli()) << 16)
	if len(o.Users) > 0 {
		var pw [16]byte
		_, _ = rand.Read(pw[:])
		// An unknown user is checked against this hash; give it the cost of
		// the costliest configured hash so the answer's delay does not tell
		// which user names exist.
		cost := 0
		for _, u := range o.Users {
			if c, err := bcrypt.Cost([]byte(u.PasswordHash)); err == nil && c > cost {
				cost = c
			}
		}
		if cost == 0 {
			cost = bcrypt.DefaultCost
		}
		h, err := bcrypt.GenerateFromPassword([]byte(hex.EncodeToString(pw[:])), cost)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.dummyHash = h
		s.creds = newCredCache()
	}
	s.log = o.Logger
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("server", s.id)
	return s, nil
}

// Ready is closed once every listener is bound and Addr/TLSAddr are valid.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr is the bound address of the plain listener; nil before Ready.
func (s *Server) Addr() net.Addr { return tcpAddr(s.addr.Load()) }

// TLSAddr is the bound address of the TLS listener; nil without TLS or
// before Ready.
func (s *Server) TLSAddr() net.Addr { return tcpAddr(s.tlsAddr.Load()) }

// tcpAddr avoids returning a typed nil as net.Addr.
func tcpAddr(a *net.TCPAddr) net.Addr {
	if a == nil {
		return nil
	}
	return a
}

// ID is the server id reported in INFO.
func (s *Server) ID() string { return s.id }

// Run opens the durable engine, binds the listeners and serves until ctx
// ends; then it drains gracefully (stops accepting, waits up to
// ShutdownTimeout for outstanding answers to be written), closes every
// connection and the engine, and returns nil. It returns an error wrapping
// ErrListen or the engine's error when startup fails.
func (s *Server) Run(ctx context.Context) error {
	if !s.ran.CompareAndSwap(false, true) {
		return ErrRunning
	}
	sm := s.observeSyncs()
	if err := s.openDurable(); err != nil {
		return err
	}
	s.auth = newAuthQueue(s)
	defer s.auth.stop()
	h := &gnetHandler{s: s, booted: make(chan struct{})}
	gerr := make(chan error, 1)
	go func() {
		gerr <- gnet.Run(h, "tcp://"+s.opts.Listen,
			gnet.WithNumEventLoop(s.opts.EventLoops),
			gnet.WithTicker(true),
			gnet.WithReuseAddr(true),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithLogger(gnetLogger{s}),
		)
	}()
	select {
	case err := <-gerr:
		s.closeDurable()
		return fmt.Errorf("%w: %s: %v", ErrListen, s.opts.Listen, err)
	case <-h.booted:
	}
	bound := h.addr.Load()
	if bound == nil {
		// The listener's address could not be read back: use the option.
		bound, _ = net.ResolveTCPAddr("tcp", s.opts.Listen)
	}
	s.addr.Store(bound)
	var tl *tlsListener
	if s.opts.TLSListen != "" {
		var err error
		if tl, err = s.listenTLS(); err != nil {
			s.stopEngine()
			<-gerr
			s.closeDurable()
			return err
		}
		if ta, ok := tl.ln.Addr().(*net.TCPAddr); ok {
			s.tlsAddr.Store(ta)
		}
	}
	if err := s.startAdmin(sm); err != nil {
		if tl != nil {
			tl.stop()
		}
		s.stopEngine()
		<-gerr
		s.closeDurable()
		return err
	}
	if s.durable != nil {
		s.engine.Store(s.durable.b)
	}
	if s.cluster != nil {
		s.cluster.node.Announce(metacat.NodeInfo{Client: s.Addr().String(), Forward: s.cluster.token})
	}
	close(s.ready)
	s.log.Info("listening", "addr", s.Addr(), "tls", s.TLSAddr(), "http", s.HTTPAddr(), "event_loops", s.opts.EventLoops)

	select {
	case <-ctx.Done():
	case err := <-gerr:
		// The engine stopped on its own: nothing more to serve.
		if tl != nil {
			tl.stop()
		}
		s.moved.stop()
		s.stopAdmin()
		s.closeDurable()
		if err != nil {
			return fmt.Errorf("server: event loops stopped: %w", err)
		}
		return nil
	}
	s.log.Info("shutting down")
	s.handOff()
	s.drain()
	if tl != nil {
		tl.stop()
	}
	s.stopEngine()
	<-gerr
	s.moved.stop()
	s.stopAdmin()
	s.closeDurable()
	s.log.Info("stopped")
	return nil
}

// drain refuses new connections and waits (bounded) until every client has
// written its outstanding answers.
func (s *Server) drain() {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	deadline := time.Now().Add(s.opts.ShutdownTimeout)
	for time.Now().Before(deadline) {
		if s.quiet() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.log.Warn("shutdown timeout: closing connections with answers outstanding")
}

// quiet reports whether no client has unanswered commands or unwritten output.
func (s *Server) quiet() bool {
	s.mu.Lock()
	cls := make([]*client, 0, len(s.clients))
	for _, c := range s.clients {
		cls = append(cls, c)
	}
	s.mu.Unlock()
	for _, c := range cls {
		c.answers.mu.Lock()
		c.mu.Lock()
		busy := !c.isClosing() && (c.answers.pendingLocked() > 0 || c.wr.out.n > 0)
		c.mu.Unlock()
		c.answers.mu.Unlock()
		if busy {
			return false
		}
	}
	return true
}

func (s *Server) stopEngine() {
	eng := s.eng.Load()
	if eng == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	if err := eng.Stop(ctx); err != nil {
		s.log.Warn("event loops did not stop in time", "err", err)
	}
}

// admit registers a new connection, or returns the refusal to send.
func (s *Server) admit(tr transport) (*client, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		// The client's mode is not known yet: NATS form (Fibril form where
		// NATS has no text).
		return nil, protocol.AppendError(nil, protocol.NewError(protocol.CodeShuttingDown, ""), false)
	}
	if len(s.clients) >= s.opts.MaxConnections {
		s.log.Warn("refusing connection: max connections", "remote", tr.remoteAddr(), "max", s.opts.MaxConnections)
		return nil, protocol.AppendError(nil, protocol.NewError(protocol.CodeMaxConnections, ""), false)
	}
	c := newClient(s, s.nextCID.Add(1), tr, s.opts.authRequired())
	s.clients[c.id] = c
	s.stats.conns.Add(1)
	return c, nil
}

// clientGone forgets a closed connection.
func (s *Server) clientGone(c *client) {
	ref := c.connRef(false) // c.mu is never taken under s.mu
	s.mu.Lock()
	if _, ok := s.clients[c.id]; ok {
		delete(s.clients, c.id)
		s.closed.add(ref, recentClosedConns)
	}
	s.mu.Unlock()
}

// tick sends heartbeats, closes stale and unauthenticated connections, and
// returns when it wants to run again. It runs on gnet's ticker goroutine.
func (s *Server) tick(now time.Time) time.Duration {
	s.mu.Lock()
	cls := make([]*client, 0, len(s.clients))
	for _, c := range s.clients {
		cls = append(cls, c)
	}
	s.mu.Unlock()
	pi := s.opts.PingInterval
	for _, c := range cls {
		if c.lingerDone(now) {
			c.tr.close() // the owner closes a lingering socket whose time is up
			continue
		}
		c.heartbeat(now, pi)
	}
	return s.tickEvery()
}

// tickEvery is the period of tick.
func (s *Server) tickEvery() time.Duration {
	return max(min(s.opts.PingInterval/4, s.opts.AuthTimeout/4), 5*time.Millisecond)
}

// infoLine is the INFO frame sent to connection c: the server's fields
// plus client_id and client_ip.
func (s *Server) infoLine(c *client, tls bool) []byte {
	info := s.info(tls)
	info.ClientID = c.id
	if host, _, err := net.SplitHostPort(c.tr.remoteAddr()); err == nil {
		info.ClientIP = host
	}
	b, err := protocol.AppendInfo(nil, &info)
	if err != nil {
		s.log.Error("encoding INFO", "err", err)
	}
	return b
}

// info returns the INFO fields common to every connection of a listener.
func (s *Server) info(tls bool) protocol.Info {
	host, port := "", 0
	ta := s.addr.Load()
	if tls {
		ta = s.tlsAddr.Load()
	}
	if ta != nil {
		host, port = ta.IP.String(), ta.Port
	}
	name := s.opts.ServerName
	if name == "" {
		name = s.id
	}
	return protocol.Info{
		ServerID: s.id, ServerName: name, Version: NATSVersion, FibrilVersion: Version, Proto: 1, Go: runtime.Version(),
		Host: host, Port: port, Headers: true, MaxPayload: int64(s.opts.MaxPayload),
		AuthRequired: s.opts.authRequired(), TLSRequired: tls,
		// The plain listener cannot upgrade a connection to TLS (gnet has
		// no TLS): TLS is on the TLS listener only, so tls_available is
		// never advertised (a client seeing it may try TLS and fail).
		Fibril: 1, MaxUnconfirmed: s.opts.MaxUnconfirmed, HeartbeatMillis: s.opts.PingInterval.Milliseconds(),
		MaxInflight: s.opts.MaxInflight, CRC: true, MaxControlLine: s.opts.MaxControlLine,
		ConnectURLs: s.connectURLs(),
	}
}
