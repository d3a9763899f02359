package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"time"

	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/seglog"
)

// ErrInvalidOptions is wrapped by every error validate returns.
var ErrInvalidOptions = errors.New("server: invalid options")

// Options configures a Server. Build one with DefaultOptions and change what
// you need; New copies it and never mutates the caller's value. The zero value
// of a field does not mean "default": DefaultOptions fills every field.
//
// Options has more fields than the house's ~25 on purpose: it is the flat,
// documented list of settings that cmd/fibril maps flags onto one by one
// (and tests set by name); it holds no state and has no methods beyond
// validation, so splitting it would only add a level to every flag.
type Options struct {
	// Listen is the host:port of the plain TCP listener (gnet). Port 0 picks
	// a free port; Server.Addr reports the bound address.
	Listen string
	// TLSListen, when not empty, is the host:port of a second listener that
	// speaks TLS (crypto/tls over the standard library) and feeds the same
	// protocol code. It needs TLSConfig or TLSCertFile+TLSKeyFile.
	TLSListen string
	// TLSCertFile and TLSKeyFile are PEM files loaded when TLSConfig is nil.
	TLSCertFile, TLSKeyFile string
	// TLSConfig, when set, is used as is for the TLS listener.
	TLSConfig *tls.Config
	// TLSHandshakeFirst lets clients of the TLS listener start with the
	// TLS handshake instead of waiting for INFO (NATS "handshake_first",
	// `nats --tlsfirst`). The listener then waits up to 50 ms for a
	// ClientHello before sending INFO in clear text to clients that wait.
	TLSHandshakeFirst bool

	// HTTPListen, when not empty, is the host:port of the HTTP admin
	// listener (server/admin: /metrics, the JSON API, the dashboard);
	// port 0 picks a free port (see Server.HTTPAddr). Off by default. It
	// asks for the server's token or user passwords when auth is on.
	HTTPListen string

	// DataDir is where the durable engine keeps its data.
	DataDir string
	// NoBroker runs the plain NATS core only: durable verbs answer
	// "durable_unavailable". Tests of the network layer use it.
	NoBroker bool
	// Engine tunes the durable engine (queue sizes, snapshots, the store
	// opener); its zero value means the engine's defaults. Logf is set by
	// the server.
	Engine broker.Options
	// ServerName is reported in INFO; empty means the generated server id.
	ServerName string
	// ConnectURLs are the client addresses (host:port) INFO's
	// connect_urls lists, so a client given one node finds the others
	// (SPEC.md 11.1); at most 64, none by default.
	ConnectURLs []string
	// Cluster makes the server one node of a cluster (cluster_opts.go);
	// nil, the default, runs a single node.
	Cluster *ClusterOptions

	// EventLoops is the number of gnet event loops; default half of
	// GOMAXPROCS, at least 1 (defaultEventLoops says why).
	EventLoops int
	// MaxConnections caps concurrent client connections (both listeners).
	MaxConnections int
	// MaxPayload caps the body (headers+payload) of one PUB/HPUB, in bytes.
	MaxPayload int
	// MaxControlLine caps one control line (verb and arguments), in bytes.
	MaxControlLine int
	// MaxSubsPerConn caps the subscriptions of one connection.
	MaxSubsPerConn int
	// MaxPending caps the bytes queued for one connection but not yet on
	// its socket (outbox, answers held behind earlier ones, the transport's
	// buffer). A delivery of any kind (plain, durable push, POLL answer)
	// that would pass it closes the connection as a slow consumer, and the
	// connection's leased messages go back to ready.
	MaxPending int
	// WriteDeadline is how long a connection's socket may take nothing
	// while output waits for it; past it the connection is closed as a
	// slow consumer (its leases go back to ready). It also bounds each
	// write of a TLS connection.
	WriteDeadline time.Duration
	// MaxInputBuffer caps the unparsed input of one connection; it must hold
	// at least one maximal frame (MaxControlLine + MaxPayload).
	MaxInputBuffer int

	// PingInterval is how long a connection may stay silent before the
	// server sends it PING.
	PingInterval time.Duration
	// MaxPingsOut is how many PINGs may go unanswered before the connection
	// is closed as stale.
	MaxPingsOut int
	// AuthTimeout is how long a new connection has to send a CONNECT that
	// authenticates it; past it the connection is closed.
	AuthTimeout time.Duration
	// PreAuthBytes caps what a connection may send before it has
	// authenticated (only CONNECT is accepted then).
	PreAuthBytes int
	// MaxAuthQueue caps the password checks waiting to be computed; past
	// it a CONNECT is answered auth_busy, unless its source (IP address)
	// is new (no unsuccessful attempt lately) or has fewer checks waiting
	// than the busiest one, whose newest check is shed instead
	// (authqueue.go).
	MaxAuthQueue int
	// AuthCPUPercent caps the share of the CPUs' time (GOMAXPROCS) spent
	// on password checks, 1 to 100.
	AuthCPUPercent int

	// Token, when set, is the shared secret every client must present as
	// auth_token in CONNECT (unless it authenticates as one of Users).
	Token string
	// Users are the accounts that may authenticate with user/pass.
	Users []User

	// MaxUnconfirmed is the per-connection window of publishes that wait for
	// their confirm; it is advertised in INFO and enforced.
	MaxUnconfirmed int
	// MaxInflight is the default push credit of a durable SUB.
	MaxInflight int
	// MaxPollWait caps the wait-ms of one POLL.
	MaxPollWait time.Duration
	// MaxPollBytes bounds one POLL answer: messages are added until it
	// holds this many bytes of subject, header and payload (at least one
	// message is always delivered).
	MaxPollBytes int
	// AutoCreate lists subject filters (wildcards allowed) under which a
	// PUB to a subject that no topic captures creates a topic named after
	// the subject (never for _INBOX.> nor $...). Empty, the default: no
	// topic is created by a publish; an uncaptured PUB reaches plain
	// subscribers only, as in NATS core. ">" allows every subject.
	AutoCreate []string
	// AutoCreateGroups lets POLL and a durable SUB create a missing group
	// (default config); off, they answer unknown_group.
	AutoCreateGroups bool

	// ShutdownTimeout bounds the graceful drain when Run's context ends.
	ShutdownTimeout time.Duration
	// Logger receives the server's logs; nil means slog.Default().
	Logger *slog.Logger
}

// User is one account for user/password authentication.
type User struct {
	// Name is the CONNECT "user" value.
	Name string `json:"name"`
	// PasswordHash is a bcrypt hash of the password (never the password).
	PasswordHash string `json:"password_bcrypt"`
	// Permissions restrict the subjects this user may use; the zero value
	// allows everything. What each grants: SPEC.md 6.1.
	Permissions Permissions `json:"permissions"`
	// Role is what the user may do on the admin HTTP listener beyond its
	// subject rights: "" (none), "monitor" (read-only) or "admin".
	Role access.Role `json:"role,omitempty"`
}

// Permissions lists subject filters (wildcards allowed) for publishing and
// consuming; deny overrides allow (package access decides, SPEC.md 6.1).
type Permissions = access.Permissions

// SubjectPermission is one allow/deny pair of subject filter lists.
type SubjectPermission = access.Rule

// maxUsers bounds Users: each user's leases are bound to its own principal
// (16 bits, two values taken).
const maxUsers = 1<<16 - 2

// defaultEventLoops is the event loop count for procs Go scheduler slots
// (GOMAXPROCS): half of them, at least one. A gnet loop waits in
// epoll_wait as a plain system call and keeps its slot (its P) while it
// waits, so with one loop per slot the idle loops held every P and the
// partition actors and fsync goroutines ran only once the runtime's
// monitor took one back; and each message crossing from one loop to
// another costs a wake-up of the other. Half leaves the other half to the
// engine. On 2 vCPUs (BENCHMARKS.md, interleaved runs): plain 1 KiB
// pub/sub 376k -> 533k msgs/s, plain 16 B 1.25M -> 1.80M, durable W1
// level or better (136k -> 140k).
func defaultEventLoops(procs int) int { return max(1, procs/2) }

// DefaultOptions returns the options `fibril serve` uses with no flags.
func DefaultOptions() Options {
	return Options{
		Listen:           "127.0.0.1:4222",
		DataDir:          "fibril-data",
		EventLoops:       defaultEventLoops(runtime.GOMAXPROCS(0)),
		MaxConnections:   64 * 1024,
		MaxPayload:       1 << 20,
		MaxControlLine:   4096,
		MaxSubsPerConn:   4096,
		MaxPending:       64 << 20,
		WriteDeadline:    10 * time.Second,
		MaxInputBuffer:   4 << 20,
		PingInterval:     2 * time.Minute,
		MaxPingsOut:      2,
		AuthTimeout:      2 * time.Second,
		PreAuthBytes:     8 << 10,
		MaxAuthQueue:     32,
		AuthCPUPercent:   15,
		MaxUnconfirmed:   1024,
		MaxInflight:      256,
		MaxPollWait:      5 * time.Minute,
		MaxPollBytes:     8 << 20,
		AutoCreateGroups: true,
		ShutdownTimeout:  10 * time.Second,
	}
}

// validate checks o and returns an error wrapping ErrInvalidOptions that
// names the first bad field.
// maxPayloadSlack is the room a log segment keeps beyond MaxPayload: record
// header, subject and the headers a dead letter gains.
const maxPayloadSlack = 128 << 10

// maxConnectURLs bounds INFO's connect_urls (SPEC.md 11.1: a client keeps
// at most 64 servers).
const maxConnectURLs = 64

func (o *Options) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		return bad("Listen %q: %v", o.Listen, err)
	}
	if o.TLSListen != "" {
		if _, _, err := net.SplitHostPort(o.TLSListen); err != nil {
			return bad("TLSListen %q: %v", o.TLSListen, err)
		}
		if o.TLSConfig == nil && (o.TLSCertFile == "" || o.TLSKeyFile == "") {
			return bad("TLSListen needs TLSConfig or TLSCertFile and TLSKeyFile")
		}
	}
	if o.HTTPListen != "" {
		if _, _, err := net.SplitHostPort(o.HTTPListen); err != nil {
			return bad("HTTPListen %q: %v", o.HTTPListen, err)
		}
	}
	if !o.NoBroker && o.DataDir == "" {
		return bad("DataDir is empty")
	}
	positive := []struct {
		name string
		v    int
	}{
		{"EventLoops", o.EventLoops}, {"MaxConnections", o.MaxConnections},
		{"MaxPayload", o.MaxPayload}, {"MaxControlLine", o.MaxControlLine},
		{"MaxSubsPerConn", o.MaxSubsPerConn}, {"MaxPending", o.MaxPending},
		{"MaxInputBuffer", o.MaxInputBuffer}, {"MaxPingsOut", o.MaxPingsOut},
		{"PreAuthBytes", o.PreAuthBytes}, {"MaxUnconfirmed", o.MaxUnconfirmed},
		{"MaxAuthQueue", o.MaxAuthQueue}, {"AuthCPUPercent", o.AuthCPUPercent},
		{"MaxInflight", o.MaxInflight}, {"MaxPollBytes", o.MaxPollBytes},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return bad("%s must be > 0, got %d", p.name, p.v)
		}
	}
	if o.MaxControlLine < 64 {
		return bad("MaxControlLine must be >= 64, got %d", o.MaxControlLine)
	}
	if o.MaxInputBuffer < o.MaxControlLine+o.MaxPayload+2 {
		return bad("MaxInputBuffer (%d) must hold one frame (MaxControlLine+MaxPayload+2 = %d)",
			o.MaxInputBuffer, o.MaxControlLine+o.MaxPayload+2)
	}
	for _, seg := range []struct {
		name string
		v    int64
	}{{"Engine.SegmentSize", o.Engine.SegmentSize}, {"Engine.EventSegmentSize", o.Engine.EventSegmentSize}} {
		if seg.v != 0 && (seg.v < seglog.MinSegmentSize || seg.v > seglog.MaxSegmentSize) {
			return bad("%s must be 0 (the default) or in [%d, %d], got %d",
				seg.name, seglog.MinSegmentSize, seglog.MaxSegmentSize, seg.v)
		}
	}
	// A message and its dead letter (the original plus a few header lines)
	// must fit in one record of the engine's log; the engine would otherwise
	// refuse it only after the client sent it.
	if seg := o.Engine.SegmentSize; !o.NoBroker && seg > 0 && int64(o.MaxPayload)+maxPayloadSlack > seg {
		return bad("MaxPayload (%d) must leave %d bytes of room in a log segment (Engine.SegmentSize %d)",
			o.MaxPayload, maxPayloadSlack, seg)
	}
	if !o.NoBroker && o.Engine.SegmentSize == 0 && int64(o.MaxPayload)+maxPayloadSlack > seglog.DefaultSegmentSize {
		return bad("MaxPayload (%d) must leave %d bytes of room in a log segment (%d)",
			o.MaxPayload, maxPayloadSlack, seglog.DefaultSegmentSize)
	}
	if o.Cluster != nil {
		if o.NoBroker {
			return bad("Cluster needs the durable engine (NoBroker is set)")
		}
		if err := o.Cluster.validate(); err != nil {
			return err
		}
	}
	if len(o.ConnectURLs) > maxConnectURLs {
		return bad("ConnectURLs: at most %d, got %d", maxConnectURLs, len(o.ConnectURLs))
	}
	for _, u := range o.ConnectURLs {
		if _, _, err := net.SplitHostPort(u); err != nil {
			return bad("ConnectURLs %q: want host:port: %v", u, err)
		}
	}
	if o.AuthCPUPercent > 100 {
		return bad("AuthCPUPercent must be in [1, 100], got %d", o.AuthCPUPercent)
	}
	if o.PreAuthBytes < 512 {
		return bad("PreAuthBytes must be >= 512, got %d", o.PreAuthBytes)
	}
	durations := []struct {
		name string
		v    time.Duration
	}{
		{"PingInterval", o.PingInterval}, {"AuthTimeout", o.AuthTimeout}, {"WriteDeadline", o.WriteDeadline},
		{"MaxPollWait", o.MaxPollWait}, {"ShutdownTimeout", o.ShutdownTimeout},
	}
	for _, d := range durations {
		if d.v <= 0 {
			return bad("%s must be > 0, got %s", d.name, d.v)
		}
	}
	if len(o.Users) > maxUsers {
		return bad("Users: at most %d, got %d", maxUsers, len(o.Users))
	}
	for _, f := range o.AutoCreate {
		if !validFilter(f) || strings.HasPrefix(f, "$") || strings.HasPrefix(f, "_INBOX.") {
			return bad("AutoCreate filter %q: not a subject filter outside $ and _INBOX", f)
		}
	}
	seen := make(map[string]bool, len(o.Users))
	for i, u := range o.Users {
		if u.Name == "" {
			return bad("Users[%d] has no name", i)
		}
		if seen[u.Name] {
			return bad("user %q listed twice", u.Name)
		}
		seen[u.Name] = true
		if !u.Role.Valid() {
			return bad("user %q: role %q is not \"\", \"monitor\" or \"admin\"", u.Name, u.Role)
		}
		if len(u.PasswordHash) < 4 || u.PasswordHash[0] != '$' {
			return bad("user %q: password_bcrypt is not a bcrypt hash", u.Name)
		}
		lists := [][]string{u.Permissions.Publish.Allow, u.Permissions.Publish.Deny,
			u.Permissions.Consume.Allow, u.Permissions.Consume.Deny}
		for _, l := range lists {
			for _, f := range l {
				if !validFilter(f) {
					return bad("user %q: bad subject filter %q", u.Name, f)
				}
			}
		}
	}
	return nil
}

// authRequired reports whether connections must authenticate.
func (o *Options) authRequired() bool { return o.Token != "" || len(o.Users) > 0 }
