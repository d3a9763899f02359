package main

// Configuration of `fibril serve`: one table of settings, each reachable as
// a flag (--max-payload), an environment variable (FIBRIL_MAX_PAYLOAD) and a
// key of the JSON config file ("max_payload"). Precedence, lowest first:
// defaults, config file (--config or FIBRIL_CONFIG), environment, flags.
//
// Config file example:
//
//	{
//	  "listen": "0.0.0.0:4222",
//	  "data": "/var/lib/fibril",
//	  "tls_listen": "0.0.0.0:4443", "tls_cert": "cert.pem", "tls_key": "key.pem",
//	  "http": "127.0.0.1:8222",
//	  "max_payload": 1048576,
//	  "ping_interval": "2m",
//	  "users": [{"name": "app", "password_bcrypt": "$2a$10$...",
//	             "permissions": {"publish": {"allow": ["orders.>"]},
//	                             "consume": {"deny": ["secret.>"]}}},
//	            {"name": "ops", "password_bcrypt": "$2a$10$...", "role": "admin"}]
//	}
//
// Durations are Go durations ("500ms", "2m"). Users exist only in the file;
// what their permissions and roles grant is SPEC.md 6.1.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fibrilmq/fibril/server"
	"github.com/fibrilmq/fibril/server/cluster"
)

// setting is one configurable value.
type setting struct {
	name  string // flag name; env is FIBRIL_ + upper snake; JSON key is snake
	usage string
	def   func(o *server.Options) string
	set   func(o *server.Options, sc *serveConfig, v string) error
	// isBool settings may be given as a bare flag (--ready-json).
	isBool bool
}

// rawFlag records a flag's text; settings are applied later, in
// precedence order.
type rawFlag struct {
	name   string
	given  map[string]string
	isBool bool
}

func (f *rawFlag) String() string     { return "" }
func (f *rawFlag) Set(v string) error { f.given[f.name] = v; return nil }
func (f *rawFlag) IsBoolFlag() bool   { return f.isBool }

// serveConfig holds what is not a server option.
type serveConfig struct {
	readyJSON bool
	logLevel  slog.Level
}

func intSetting(name, usage string, p func(o *server.Options) *int) setting {
	return setting{name, usage,
		func(o *server.Options) string { return strconv.Itoa(*p(o)) },
		func(o *server.Options, _ *serveConfig, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			*p(o) = n
			return nil
		}, false}
}

func int64Setting(name, usage string, p func(o *server.Options) *int64) setting {
	return setting{name, usage,
		func(o *server.Options) string { return strconv.FormatInt(*p(o), 10) },
		func(o *server.Options, _ *serveConfig, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			*p(o) = n
			return nil
		}, false}
}

func strSetting(name, usage string, p func(o *server.Options) *string) setting {
	return setting{name, usage,
		func(o *server.Options) string { return *p(o) },
		func(o *server.Options, _ *serveConfig, v string) error { *p(o) = v; return nil }, false}
}

func durSetting(name, usage string, p func(o *server.Options) *time.Duration) setting {
	return setting{name, usage,
		func(o *server.Options) string { return p(o).String() },
		func(o *server.Options, _ *serveConfig, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			*p(o) = d
			return nil
		}, false}
}

func boolSetting(name, usage string, p func(o *server.Options, sc *serveConfig) *bool) setting {
	return setting{name, usage,
		func(o *server.Options) string { return strconv.FormatBool(*p(o, &serveConfig{})) },
		func(o *server.Options, sc *serveConfig, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			*p(o, sc) = b
			return nil
		}, true}
}

var settings = []setting{
	strSetting("listen", "host:port of the plain listener (port 0: any free port)", func(o *server.Options) *string { return &o.Listen }),
	strSetting("data", "data directory of the durable engine", func(o *server.Options) *string { return &o.DataDir }),
	strSetting("name", "server name reported in INFO", func(o *server.Options) *string { return &o.ServerName }),
	strSetting("tls-listen", "host:port of the TLS listener (off when empty)", func(o *server.Options) *string { return &o.TLSListen }),
	strSetting("tls-cert", "PEM certificate file for the TLS listener", func(o *server.Options) *string { return &o.TLSCertFile }),
	strSetting("tls-key", "PEM key file for the TLS listener", func(o *server.Options) *string { return &o.TLSKeyFile }),
	strSetting("http", "host:port of the HTTP admin listener: metrics, API, dashboard (off when empty)", func(o *server.Options) *string { return &o.HTTPListen }),
	strSetting("token", "shared auth token clients must present (turns auth on)", func(o *server.Options) *string { return &o.Token }),
	intSetting("event-loops", "number of network event loops", func(o *server.Options) *int { return &o.EventLoops }),
	intSetting("max-connections", "maximum concurrent connections", func(o *server.Options) *int { return &o.MaxConnections }),
	intSetting("max-open-partitions", "partitions whose logs stay open at once (4 files each); idle ones past it close their logs until their next command (0: half of ulimit -n, divided by 4)", func(o *server.Options) *int { return &o.Engine.MaxOpenPartitions }),
	intSetting("max-payload", "maximum message size in bytes (headers+payload)", func(o *server.Options) *int { return &o.MaxPayload }),
	intSetting("max-control-line", "maximum control line length in bytes", func(o *server.Options) *int { return &o.MaxControlLine }),
	intSetting("max-subs", "maximum subscriptions per connection", func(o *server.Options) *int { return &o.MaxSubsPerConn }),
	intSetting("max-pending", "maximum unwritten output per connection in bytes", func(o *server.Options) *int { return &o.MaxPending }),
	intSetting("max-input-buffer", "maximum unparsed input per connection in bytes", func(o *server.Options) *int { return &o.MaxInputBuffer }),
	intSetting("max-pings-out", "unanswered server PINGs before a connection is closed", func(o *server.Options) *int { return &o.MaxPingsOut }),
	intSetting("pre-auth-bytes", "bytes a connection may send before authenticating", func(o *server.Options) *int { return &o.PreAuthBytes }),
	intSetting("max-auth-queue", "password checks that may wait; past it a CONNECT is answered auth_busy", func(o *server.Options) *int { return &o.MaxAuthQueue }),
	intSetting("auth-cpu-percent", "share of the CPUs' time password checks may use, 1 to 100", func(o *server.Options) *int { return &o.AuthCPUPercent }),
	intSetting("max-unconfirmed", "publish window per connection (advertised in INFO)", func(o *server.Options) *int { return &o.MaxUnconfirmed }),
	intSetting("max-inflight", "default push credit of a durable SUB", func(o *server.Options) *int { return &o.MaxInflight }),
	intSetting("max-poll-bytes", "bytes one POLL answer may carry (at least one message is delivered)", func(o *server.Options) *int { return &o.MaxPollBytes }),
	int64Setting("segment-size", "bytes per data log segment file (0: 64 MiB)", func(o *server.Options) *int64 { return &o.Engine.SegmentSize }),
	int64Setting("event-segment-size", "bytes per consumer-state event log segment file (0: 4 MiB)", func(o *server.Options) *int64 { return &o.Engine.EventSegmentSize }),
	durSetting("ping-interval", "idle time before the server PINGs a client", func(o *server.Options) *time.Duration { return &o.PingInterval }),
	durSetting("auth-timeout", "time a connection has to authenticate", func(o *server.Options) *time.Duration { return &o.AuthTimeout }),
	durSetting("write-deadline", "time a socket may take nothing while output waits before the connection is cut as a slow consumer", func(o *server.Options) *time.Duration { return &o.WriteDeadline }),
	durSetting("max-poll-wait", "longest wait a POLL may ask for", func(o *server.Options) *time.Duration { return &o.MaxPollWait }),
	durSetting("shutdown-timeout", "longest graceful drain on shutdown", func(o *server.Options) *time.Duration { return &o.ShutdownTimeout }),
	{"auto-create", "comma-separated subject filters (e.g. 'orders.>'): a PUB to an uncaptured subject matching one creates a topic named after it (off when empty)",
		func(o *server.Options) string { return strings.Join(o.AutoCreate, ",") },
		func(o *server.Options, _ *serveConfig, v string) error {
			o.AutoCreate = nil
			for f := range strings.SplitSeq(v, ",") {
				if f = strings.TrimSpace(f); f != "" {
					o.AutoCreate = append(o.AutoCreate, f)
				}
			}
			return nil
		}, false},
	{"client-advertise", "comma-separated host:port client addresses INFO's connect_urls lists, so clients given one node find the others (SPEC.md 11.1; at most 64)",
		func(o *server.Options) string { return strings.Join(o.ConnectURLs, ",") },
		func(o *server.Options, _ *serveConfig, v string) error {
			o.ConnectURLs = nil
			for a := range strings.SplitSeq(v, ",") {
				if a = strings.TrimSpace(a); a != "" {
					o.ConnectURLs = append(o.ConnectURLs, a)
				}
			}
			return nil
		}, false},
	clusterSetting("cluster-name", "this node's name in a cluster (a DNS label its certificate carries; turns clustering on, README \"Running a cluster\")", func(c *server.ClusterOptions) *string { return &c.Name }),
	clusterSetting("cluster-listen", "host:port of this node's cluster links (mutual TLS)", func(c *server.ClusterOptions) *string { return &c.Listen }),
	clusterSetting("cluster-ca", "PEM file of the cluster's CA", func(c *server.ClusterOptions) *string { return &c.TLS.CA }),
	clusterSetting("cluster-cert", "PEM certificate file of this node (fibril certs makes one)", func(c *server.ClusterOptions) *string { return &c.TLS.Cert }),
	clusterSetting("cluster-key", "PEM key file of this node", func(c *server.ClusterOptions) *string { return &c.TLS.Key }),
	{"cluster-tick", "raft's tick in a cluster; a leader unheard for cluster-election-ticks ticks is replaced (default 100ms)",
		func(o *server.Options) string {
			if o.Cluster == nil || o.Cluster.Tick == 0 {
				return "100ms"
			}
			return o.Cluster.Tick.String()
		},
		func(o *server.Options, _ *serveConfig, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Millisecond || d > 10*time.Second {
				return fmt.Errorf("cluster-tick %q: want a duration from 1ms to 10s", v)
			}
			clusterOf(o).Tick = d
			return nil
		}, false},
	{"cluster-election-ticks", "ticks without a leader's heartbeat before a follower stands for election (default 10: a dead leader is replaced in about 1-2 s)",
		func(o *server.Options) string {
			if o.Cluster == nil || o.Cluster.ElectionTicks == 0 {
				return "10"
			}
			return strconv.Itoa(o.Cluster.ElectionTicks)
		},
		func(o *server.Options, _ *serveConfig, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 2 || n > 1000 {
				return fmt.Errorf("cluster-election-ticks %q: want 2 to 1000", v)
			}
			clusterOf(o).ElectionTicks = n
			return nil
		}, false},
	{"cluster-peers", "the other nodes of the cluster, comma-separated name@host:port of their cluster links (3 or 5 nodes in all)",
		func(o *server.Options) string {
			if o.Cluster == nil {
				return ""
			}
			var parts []string
			for _, p := range o.Cluster.Peers {
				parts = append(parts, p.Name+"@"+p.Addr)
			}
			return strings.Join(parts, ",")
		},
		func(o *server.Options, _ *serveConfig, v string) error {
			peers, err := cluster.ParsePeers(v)
			if err != nil {
				return fmt.Errorf("cluster-peers: %w", err)
			}
			clusterOf(o).Peers = peers
			return nil
		}, false},
	boolSetting("tls-handshake-first", "TLS listener: also accept clients that start TLS before INFO (nats --tlsfirst; waits 50 ms for them)", func(o *server.Options, _ *serveConfig) *bool { return &o.TLSHandshakeFirst }),
	boolSetting("auto-create-groups", "create a missing group on POLL or durable SUB", func(o *server.Options, _ *serveConfig) *bool { return &o.AutoCreateGroups }),
	boolSetting("no-durable", "serve the plain NATS core only (no data directory)", func(o *server.Options, _ *serveConfig) *bool { return &o.NoBroker }),
	boolSetting("quick-start", "at start check only the segments no earlier start checked (the scrub rechecks the rest at once) instead of every stored record", func(o *server.Options, _ *serveConfig) *bool { return &o.Engine.QuickStart }),
	boolSetting("ready-json", "print one JSON line {\"addr\":...} on stdout once listening", func(_ *server.Options, sc *serveConfig) *bool { return &sc.readyJSON }),
	{"log-level", "log level: debug, info, warn, error",
		func(*server.Options) string { return "info" },
		func(_ *server.Options, sc *serveConfig, v string) error {
			return sc.logLevel.UnmarshalText([]byte(v))
		}, false},
}

// clusterOf returns o's cluster options, making them on first use.
func clusterOf(o *server.Options) *server.ClusterOptions {
	if o.Cluster == nil {
		o.Cluster = &server.ClusterOptions{}
	}
	return o.Cluster
}

// clusterSetting is a string setting of the cluster options: giving one
// turns clustering on.
func clusterSetting(name, usage string, p func(c *server.ClusterOptions) *string) setting {
	return setting{name, usage,
		func(o *server.Options) string {
			if o.Cluster == nil {
				return ""
			}
			return *p(o.Cluster)
		},
		func(o *server.Options, _ *serveConfig, v string) error { *p(clusterOf(o)) = v; return nil }, false}
}

func envName(flagName string) string {
	return "FIBRIL_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func jsonKey(flagName string) string { return strings.ReplaceAll(flagName, "-", "_") }

// serveOptions builds the server options from args, the environment
// (through lookup) and the config file.
func serveOptions(args []string, lookup func(string) (string, bool), stderr io.Writer) (server.Options, serveConfig, error) {
	defaults := server.DefaultOptions()
	fs := newFlagSet("serve", stderr)
	given := make(map[string]string)
	for _, s := range settings {
		fs.Var(&rawFlag{name: s.name, given: given, isBool: s.isBool},
			s.name, fmt.Sprintf("%s (env %s, default %q)", s.usage, envName(s.name), s.def(&defaults)))
	}
	config := fs.String("config", "", "JSON config file (env FIBRIL_CONFIG)")
	if err := fs.Parse(args); err != nil {
		return server.Options{}, serveConfig{}, err
	}
	if fs.NArg() > 0 {
		return server.Options{}, serveConfig{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	opts := defaults
	sc := serveConfig{logLevel: slog.LevelInfo}
	path := *config
	if path == "" {
		path, _ = lookup("FIBRIL_CONFIG")
	}
	if path != "" {
		if err := loadConfigFile(path, &opts, &sc); err != nil {
			return server.Options{}, serveConfig{}, err
		}
	}
	for _, s := range settings {
		v, ok := given[s.name]
		if !ok {
			v, ok = lookup(envName(s.name))
		}
		if !ok {
			continue
		}
		if err := s.set(&opts, &sc, v); err != nil {
			return server.Options{}, serveConfig{}, err
		}
	}
	return opts, sc, nil
}

// loadConfigFile applies a JSON config file on top of opts.
func loadConfigFile(path string, opts *server.Options, sc *serveConfig) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var doc map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	known := make(map[string]setting, len(settings))
	for _, s := range settings {
		known[jsonKey(s.name)] = s
	}
	for key, val := range doc {
		if key == "users" {
			// Strict: a misspelt "role" or "deny" must not pass unnoticed.
			ud := json.NewDecoder(bytes.NewReader(val))
			ud.DisallowUnknownFields()
			if err := ud.Decode(&opts.Users); err != nil {
				return fmt.Errorf("config %s: users: %w", path, err)
			}
			continue
		}
		s, ok := known[key]
		if !ok {
			return fmt.Errorf("config %s: unknown key %q", path, key)
		}
		// Accept JSON strings, numbers and booleans alike.
		var v any
		if err := json.Unmarshal(val, &v); err != nil {
			return fmt.Errorf("config %s: %s: %w", path, key, err)
		}
		var str string
		switch x := v.(type) {
		case string:
			str = x
		case float64:
			str = strconv.FormatFloat(x, 'f', -1, 64)
		case bool:
			str = strconv.FormatBool(x)
		case []any: // a list of strings, e.g. "auto_create": ["orders.>"]
			parts := make([]string, 0, len(x))
			for _, e := range x {
				es, ok := e.(string)
				if !ok {
					return fmt.Errorf("config %s: %s: want a list of strings", path, key)
				}
				parts = append(parts, es)
			}
			str = strings.Join(parts, ",")
		default:
			return fmt.Errorf("config %s: %s: want a string, number, boolean or list of strings", path, key)
		}
		if err := s.set(opts, sc, str); err != nil {
			return fmt.Errorf("config %s: %w", path, err)
		}
	}
	return nil
}
