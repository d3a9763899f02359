package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/stagetime"
)

// ErrInvalidOptions is wrapped by every error New returns for bad Options.
var ErrInvalidOptions = errors.New("admin: invalid options")

// ErrListen wraps a failure to bind the admin address.
var ErrListen = errors.New("admin: listen failed")

// Options configures an admin Server.
type Options struct {
	// Addr is the host:port to listen on, e.g. "127.0.0.1:8222"; port 0
	// picks a free port (see Server.Addr).
	Addr string
	// Broker returns the running engine, or nil while it is not open (then
	// /readyz answers 503 and the API answers 503). A method value such as
	// srv.Broker fits.
	Broker func() *broker.Broker
	// Conns lists client connections for /api/connections and the
	// connection gauges; nil means the listing is not available.
	Conns ConnSource
	// Authenticate, when set, identifies the caller of every path except
	// /healthz and /readyz; a request it refuses gets 401, and what the
	// identity may not do gets 403 (SPEC.md 6.1). Nil means no
	// authentication: every caller is unrestricted (use it only on a
	// loopback address). See TokenAuth, BcryptAuth.
	Authenticate Authenticator
	// ServerName labels the dashboard and the fibril_server_info metric.
	ServerName string
	// Version is reported by fibril_server_info.
	Version string
	// Sync, when set, adds the fsync latency and group-commit batch
	// histograms to /metrics; the same value must be the engine's
	// broker.Options.Observer for them to move.
	Sync *SyncMetrics
	// Stages, when set, adds the stage accounting (fibril_stage_seconds)
	// and the Go runtime's pauses to /metrics (stages.go).
	Stages *stagetime.Recorder
	// Cluster, when set, is the cluster this server is a node of: it adds
	// GET /api/cluster's nodes and partitions and the fibril_raft_* and
	// fibril_cluster_* series of /metrics (cluster.go). Nil is a single
	// node.
	Cluster ClusterSource
}

// ConnSource lists the server's client connections. Connections is called
// once per request or scrape from an HTTP goroutine; it must not block on a
// connection and must return a fresh slice. A ConnSource that also
// implements ConnResolver lets the event-log browser name the connection
// each delivery went to.
type ConnSource interface {
	Connections() []ConnInfo
}

// ConnResolver names a connection by id, open or recently closed, for the
// message history (the server uses connection ids as broker.OwnerID).
// LookupConn is called from an HTTP goroutine; it must not block on a
// connection. It reports false for an id it does not remember.
type ConnResolver interface {
	LookupConn(id uint64) (ConnRef, bool)
}

// ConnRef names one client connection.
type ConnRef struct {
	ID     uint64 `json:"id"`
	Name   string `json:"name,omitempty"`
	Remote string `json:"remote,omitempty"`
	User   string `json:"user,omitempty"`
	// Open is false once the connection has closed.
	Open bool `json:"open"`
}

// Label is the short form the history shows: "conn 17 (worker-a,
// 127.0.0.1:51234)", with the user when known and "closed" once closed.
func (r ConnRef) Label() string {
	var parts []string
	if r.Name != "" {
		parts = append(parts, r.Name)
	}
	if r.User != "" {
		parts = append(parts, "user "+r.User)
	}
	if r.Remote != "" {
		parts = append(parts, r.Remote)
	}
	if !r.Open {
		parts = append(parts, "closed")
	}
	l := "conn " + strconv.FormatUint(r.ID, 10)
	if len(parts) > 0 {
		l += " (" + strings.Join(parts, ", ") + ")"
	}
	return l
}

// ConnInfo describes one client connection.
type ConnInfo struct {
	ID        uint64    `json:"id"`
	Remote    string    `json:"remote"`
	Name      string    `json:"name,omitempty"`
	Lang      string    `json:"lang,omitempty"`
	Version   string    `json:"version,omitempty"`
	User      string    `json:"user,omitempty"`
	TLS       bool      `json:"tls"`
	Fibril    bool      `json:"fibril"`
	Connected time.Time `json:"connected"`
	Subs      int       `json:"subscriptions"`
	InMsgs    uint64    `json:"in_msgs"`
	OutMsgs   uint64    `json:"out_msgs"`
	InBytes   uint64    `json:"in_bytes"`
	OutBytes  uint64    `json:"out_bytes"`
	Pending   int       `json:"pending_bytes"`
}

// Server is a running admin listener.
type Server struct {
	opts Options
	ln   net.Listener
	http *http.Server
}

// New validates opts and binds the listener (so a bad or busy address fails
// here, wrapped in ErrListen); it serves nothing until Serve.
func New(opts Options) (*Server, error) {
	if opts.Addr == "" {
		return nil, fmt.Errorf("%w: Addr is empty", ErrInvalidOptions)
	}
	if opts.Broker == nil {
		return nil, fmt.Errorf("%w: Broker is nil", ErrInvalidOptions)
	}
	if opts.ServerName == "" {
		opts.ServerName = "fibril"
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrListen, opts.Addr, err)
	}
	s := &Server{opts: opts, ln: ln}
	s.http = &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	return s, nil
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// URL is the base URL of the listener, e.g. "http://127.0.0.1:8222".
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Handler returns the HTTP handler, for embedding in another mux.
func (s *Server) Handler() http.Handler { return s.http.Handler }

// Serve answers requests until ctx ends or Close is called, then shuts down
// gracefully (at most 5 s) and returns nil; other failures are returned.
func (s *Server) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.http.Shutdown(sctx)
	})
	defer stop()
	err := s.http.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("admin: serve: %w", err)
}

// Close stops the listener and closes every connection at once.
func (s *Server) Close() error {
	err := s.http.Close()
	// Serve may never have run, so the listener is closed here too.
	if lerr := s.ln.Close(); lerr != nil && !errors.Is(lerr, net.ErrClosed) && err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("admin: close: %w", err)
	}
	return nil
}
