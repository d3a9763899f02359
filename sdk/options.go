package fibril

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Option configures Connect. Options are applied in order and validated once,
// together, before anything is dialled.
type Option func(*config) error

// config is the validated connection configuration. It is never mutated after
// Connect returns.
type config struct {
	name          string
	token         string
	user, pass    string
	tls           *tls.Config
	crc           bool
	dialTimeout   time.Duration
	reqTimeout    time.Duration
	reconnect     ReconnectPolicy
	heartbeat     time.Duration
	maxPingsOut   int
	logger        *slog.Logger
	maxInFlightPb int
	servers       []string // WithServers, after Connect's own
	noDiscovery   bool
}

// ReconnectPolicy says whether and how a Conn reconnects after it loses its
// server. Each attempt dials the next server of the list (see Connect), after
// a delay that grows from InitialDelay by Multiplier up to MaxDelay once per
// full pass over the list, each with up to Jitter (a fraction, 0..1) of
// random spread. MaxAttempts counts attempts, one per server tried; 0 means
// retry until Close; a negative value disables reconnecting. A refusal no
// retry can change (wrong credentials) from every server of a pass in a row
// closes the Conn. BufferBytes bounds the
// publishes (encoded size) kept for replay while disconnected; a publish that
// does not fit fails with ErrReconnectBufferFull.
type ReconnectPolicy struct {
	InitialDelay time.Duration
	MaxDelay     time.Duration
	Multiplier   float64
	Jitter       float64
	MaxAttempts  int
	BufferBytes  int
}

// DefaultReconnectPolicy returns the policy Connect uses unless told otherwise:
// 50 ms doubling to 2 s with 20% jitter, forever, with an 8 MiB replay buffer.
func DefaultReconnectPolicy() ReconnectPolicy {
	return ReconnectPolicy{
		InitialDelay: 50 * time.Millisecond,
		MaxDelay:     2 * time.Second,
		Multiplier:   2,
		Jitter:       0.2,
		MaxAttempts:  0,
		BufferBytes:  8 << 20,
	}
}

// delay returns the wait before reconnect attempt n (0-based).
func (p ReconnectPolicy) delay(n int) time.Duration {
	d := float64(p.InitialDelay)
	for i := 0; i < n && d < float64(p.MaxDelay); i++ {
		d *= p.Multiplier
	}
	d = min(d, float64(p.MaxDelay))
	if p.Jitter > 0 {
		d += d * p.Jitter * (2*rand.Float64() - 1)
	}
	return time.Duration(max(d, 0))
}

func (p ReconnectPolicy) validate() error {
	switch {
	case p.MaxAttempts < 0:
		return nil // disabled; the rest does not matter
	case p.InitialDelay <= 0:
		return errors.New("reconnect: InitialDelay must be > 0")
	case p.MaxDelay < p.InitialDelay:
		return errors.New("reconnect: MaxDelay must be >= InitialDelay")
	case p.Multiplier < 1:
		return errors.New("reconnect: Multiplier must be >= 1")
	case p.Jitter < 0 || p.Jitter > 1:
		return errors.New("reconnect: Jitter must be within [0, 1]")
	case p.BufferBytes < 0:
		return errors.New("reconnect: BufferBytes must be >= 0")
	}
	return nil
}

func defaultConfig() config {
	return config{
		name:        "",
		crc:         true,
		dialTimeout: 5 * time.Second,
		reqTimeout:  0,
		reconnect:   DefaultReconnectPolicy(),
		heartbeat:   30 * time.Second,
		maxPingsOut: 2,
	}
}

func (c *config) validate() error {
	if c.token != "" && c.user != "" {
		return errors.New("token and user/password are mutually exclusive")
	}
	if c.dialTimeout <= 0 {
		return errors.New("dial timeout must be > 0")
	}
	if c.heartbeat < 0 {
		return errors.New("heartbeat interval must be >= 0")
	}
	if c.maxPingsOut < 1 {
		return errors.New("max pings out must be >= 1")
	}
	if c.maxInFlightPb < 0 {
		return errors.New("max unconfirmed publishes must be >= 0")
	}
	if err := c.reconnect.validate(); err != nil {
		return err
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// WithName sets the connection name the server shows in its logs and admin API.
func WithName(name string) Option {
	return func(c *config) error { c.name = name; return nil }
}

// WithToken authenticates with a token. It excludes WithUserPassword.
func WithToken(token string) Option {
	return func(c *config) error {
		if token == "" {
			return errors.New("WithToken: empty token")
		}
		c.token = token
		return nil
	}
}

// WithUserPassword authenticates with a user name and password. It excludes
// WithToken.
func WithUserPassword(user, password string) Option {
	return func(c *config) error {
		if user == "" {
			return errors.New("WithUserPassword: empty user")
		}
		c.user, c.pass = user, password
		return nil
	}
}

// WithTLS makes the connection use TLS with cfg (cloned; nil means defaults).
// A tls:// URL turns TLS on as well.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) error {
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		c.tls = cfg.Clone()
		return nil
	}
}

// WithCRC turns end-to-end CRC-32 checking on (the default) or off. With it
// on, every publish carries the checksum of its bytes and every delivery is
// verified before it is handed out.
func WithCRC(on bool) Option {
	return func(c *config) error { c.crc = on; return nil }
}

// WithDialTimeout bounds dialling and the handshake of each connection
// attempt (default 5 s).
func WithDialTimeout(d time.Duration) Option {
	return func(c *config) error { c.dialTimeout = d; return nil }
}

// WithRequestTimeout bounds every request whose context has no deadline
// (default: none; the context alone decides).
func WithRequestTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return errors.New("WithRequestTimeout: negative duration")
		}
		c.reqTimeout = d
		return nil
	}
}

// WithServers adds servers to the list Connect tries, after those of its
// URL argument (which may then be empty). Each is a URL as Connect takes
// (its scheme and credentials apply to it alone); a repeated address is
// kept once. The list, discovered servers included, holds at most 64.
func WithServers(urls ...string) Option {
	return func(c *config) error {
		c.servers = append(c.servers, urls...)
		return nil
	}
}

// WithoutDiscovery keeps the server list to the servers given: the
// connect_urls of the servers' INFO are not added to it.
func WithoutDiscovery() Option {
	return func(c *config) error { c.noDiscovery = true; return nil }
}

// WithReconnect sets the reconnect policy (see ReconnectPolicy).
func WithReconnect(p ReconnectPolicy) Option {
	return func(c *config) error { c.reconnect = p; return nil }
}

// WithoutReconnect makes a lost connection final: pending requests fail with
// ErrConnectionLost and the Conn is closed.
func WithoutReconnect() Option {
	return func(c *config) error { c.reconnect.MaxAttempts = -1; return nil }
}

// WithHeartbeat sets how often the client pings the server (default 30 s;
// 0 disables) and how many unanswered pings declare it dead (default 2);
// the connection is then dropped and re-established. Answers are ordered
// (SPEC.md section 4), so a slow command delays the PONGs behind it: keep
// interval × maxOutstanding well above the slowest command you send (a
// waiting POLL is exempt from the check).
func WithHeartbeat(interval time.Duration, maxOutstanding int) Option {
	return func(c *config) error {
		c.heartbeat, c.maxPingsOut = interval, maxOutstanding
		return nil
	}
}

// WithMaxUnconfirmed caps the publishes awaiting a confirm on this Conn
// (default: the server's max_unconfirmed from INFO; a smaller value wins).
func WithMaxUnconfirmed(n int) Option {
	return func(c *config) error { c.maxInFlightPb = n; return nil }
}

// WithLogger sets the structured logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("WithLogger: nil logger")
		}
		c.logger = l
		return nil
	}
}
