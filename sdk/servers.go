package fibril

// The server list (SPEC.md section 11.1): the URLs given to Connect, in
// order, then the connect_urls learnt from each INFO, once each and at most
// maxServers in all. Connect tries them in order; a reconnect tries the
// next one after the server it lost, wrapping around.

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// maxServers bounds the server list, given and discovered together (SPEC.md
// 11.1; the server sends at most as many connect_urls).
const maxServers = 64

// server is one entry of the list: where to dial and how to talk to it.
type server struct {
	addr       string // host:port
	host       string // for TLS verification
	tls        bool   // the URL's scheme asks for TLS (tls://, fibrils://)
	user, pass string // the URL's user info: a user alone is a token
	hasUser    bool
	discovered bool // learnt from connect_urls
}

// serverList is a Conn's servers. Guarded by Conn.mu once the Conn exists.
type serverList struct {
	s   []server
	cur int // index of the server connected to (or last tried)
}

// parseServers builds the list from Connect's rawURL (comma-separated) and
// WithServers' URLs, in that order. An empty rawURL adds nothing when
// WithServers gives some; alone it means 127.0.0.1:4222, as it always has.
// A repeated address is kept once, in its first place.
func parseServers(rawURL string, more []string) (serverList, error) {
	var raws []string
	if strings.TrimSpace(rawURL) != "" || len(more) == 0 {
		raws = strings.Split(rawURL, ",")
		if len(raws) == 1 && strings.TrimSpace(raws[0]) == "" {
			raws[0] = "" // the default server
		} else {
			for i, r := range raws {
				if strings.TrimSpace(r) == "" {
					return serverList{}, fmt.Errorf("fibril: %w: server list %q: entry %d is empty", ErrInvalidArgument, rawURL, i+1)
				}
			}
		}
	}
	for _, m := range more {
		if strings.TrimSpace(m) == "" {
			return serverList{}, fmt.Errorf("fibril: %w: WithServers: empty URL", ErrInvalidArgument)
		}
		raws = append(raws, m)
	}
	var l serverList
	for _, raw := range raws {
		s, err := parseServer(strings.TrimSpace(raw))
		if err != nil {
			return serverList{}, err
		}
		if !l.has(s.addr) && !l.add(s) {
			return serverList{}, fmt.Errorf("fibril: %w: more than %d servers", ErrInvalidArgument, maxServers)
		}
	}
	return l, nil
}

// parseServer parses one URL: fibril://, nats://, tcp:// (clear text),
// tls:// or fibrils:// (TLS), or a bare host:port; the host defaults to
// 127.0.0.1 and the port to 4222.
func parseServer(raw string) (server, error) {
	full := raw
	if !strings.Contains(full, "://") {
		full = "fibril://" + full
	}
	u, err := url.Parse(full)
	if err != nil {
		return server{}, fmt.Errorf("fibril: %w: url %q: %w", ErrInvalidArgument, raw, err)
	}
	var s server
	switch u.Scheme {
	case "fibril", "nats", "tcp":
	case "tls", "fibrils":
		s.tls = true
	default:
		return server{}, fmt.Errorf("fibril: %w: url %q: scheme %q (want fibril, nats, tcp, tls or fibrils)", ErrInvalidArgument, raw, u.Scheme)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
		return server{}, fmt.Errorf("fibril: %w: url %q: a server URL has no path, query or fragment", ErrInvalidArgument, raw)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "4222"
	}
	s.addr, s.host = net.JoinHostPort(host, port), host
	if u.User != nil {
		s.user, s.hasUser = u.User.Username(), true
		s.pass, _ = u.User.Password()
	}
	return s, nil
}

// add appends s unless its address is listed already or the list is full;
// it reports whether s was added.
func (l *serverList) add(s server) bool {
	if len(l.s) >= maxServers || l.has(s.addr) {
		return false
	}
	l.s = append(l.s, s)
	return true
}

// has reports whether addr is listed.
func (l *serverList) has(addr string) bool {
	for _, o := range l.s {
		if o.addr == addr {
			return true
		}
	}
	return false
}

// discover adds the connect_urls of an INFO received from the server at
// index from: each takes that server's scheme and credentials. It returns
// the addresses added and the entries that are not host:port (skipped).
func (l *serverList) discover(from int, urls []string) (added []string, bad []string) {
	tmpl := l.s[from]
	for _, u := range urls {
		host, _, err := net.SplitHostPort(u)
		if err != nil || host == "" {
			bad = append(bad, u)
			continue
		}
		s := tmpl
		s.addr, s.host, s.discovered = u, host, true
		if l.add(s) {
			added = append(added, u)
		}
	}
	return added, bad
}

// addrs returns the addresses, in order.
func (l *serverList) addrs() []string {
	a := make([]string, len(l.s))
	for i, s := range l.s {
		a[i] = s.addr
	}
	return a
}

// ErrNoServers: Connect reached none of its servers. The error Connect
// returns wraps it and the failure of each server tried, in order (test
// those with errors.Is too: ErrAuthViolation, context.DeadlineExceeded).
var ErrNoServers = errors.New("fibril: no server reachable")

// noServersError is Connect's failure: each address tried and why it failed.
type noServersError struct {
	addrs []string
	errs  []error
}

func (e *noServersError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v (tried %d):", ErrNoServers, len(e.addrs))
	for i, a := range e.addrs {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " %s: %v", a, e.errs[i])
	}
	return b.String()
}

// Unwrap returns ErrNoServers and each server's error.
func (e *noServersError) Unwrap() []error { return append([]error{ErrNoServers}, e.errs...) }
