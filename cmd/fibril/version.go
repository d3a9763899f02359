package main

// The version stamp: `make dist` sets these with -ldflags -X (see the
// Makefile); a plain `go build` or `go run` leaves the defaults.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/fibrilmq/fibril/server"
)

var (
	version = ""        // release version; default server.Version
	commit  = "unknown" // git commit the binary was built from
	date    = "unknown" // build date, UTC, RFC 3339
)

// versionLine is what `fibril version` prints.
func versionLine() string {
	v := version
	if v == "" {
		v = server.Version
	}
	return fmt.Sprintf("fibril %s (commit %s, built %s)", v, commit, date)
}

// checkListeners binds and releases each address serve will listen on
// (a fixed port only: port 0 cannot be taken), so that a taken port is
// reported before anything is written to disk.
func checkListeners(opts server.Options) error {
	for _, l := range []struct{ what, addr string }{{"listen", opts.Listen}, {"tls-listen", opts.TLSListen}, {"http", opts.HTTPListen}} {
		if l.addr == "" {
			continue
		}
		if ap, err := netip.ParseAddrPort(l.addr); err == nil && ap.Port() == 0 {
			continue
		}
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			var oe *net.OpError
			if errors.As(err, &oe) && oe.Err != nil {
				err = oe.Err // "bind: address already in use", without the address again
			}
			return fmt.Errorf("--%s %s: %w (another process listens there? choose another address with --%s)", l.what, l.addr, err, l.what)
		}
		ln.Close()
	}
	return nil
}
