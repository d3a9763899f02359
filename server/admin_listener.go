package server

// The HTTP admin listener (server/admin), on when Options.HTTPListen is set:
// metrics, the JSON API, the dashboard and the event-log browser. Its
// authentication follows the server's: with a token, the token (Bearer or
// as a basic-auth password); with users, their bcrypt passwords, checked
// through the same cache and bounded queue as CONNECT's (passwords.go);
// with neither, none (then keep it on loopback). The identities are the wire's
// (auth.go), and what each may do there is SPEC.md 6.1.

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/fibrilmq/fibril/server/admin"
	"github.com/fibrilmq/fibril/server/broker"
)

// adminListener is the running admin server.
type adminListener struct {
	srv  *admin.Server
	stop context.CancelFunc
	done chan error
}

// Broker returns the durable engine while it is open (from Ready until
// shutdown), else nil: before Run, with NoBroker, and after Run returns.
func (s *Server) Broker() *broker.Broker { return s.engine.Load() }

// HTTPAddr is the bound address of the admin listener; nil when it is off
// or before Ready.
func (s *Server) HTTPAddr() net.Addr {
	if s.admin == nil {
		return nil
	}
	return s.admin.srv.Addr()
}

// observeSyncs chains the admin's histograms in front of any Observer the
// caller set; called before the engine opens.
func (s *Server) observeSyncs() *admin.SyncMetrics {
	if s.opts.HTTPListen == "" {
		return nil
	}
	sm := admin.NewSyncMetrics()
	if prev := s.opts.Engine.Observer; prev != nil {
		s.opts.Engine.Observer = observers{sm, prev}
	} else {
		s.opts.Engine.Observer = sm
	}
	return sm
}

// observers fans one engine Observer out to several.
type observers []broker.Observer

func (obs observers) ObserveSync(d time.Duration, records int) {
	for _, o := range obs {
		o.ObserveSync(d, records)
	}
}

// startAdmin binds and serves the admin listener (a no-op without
// HTTPListen). Errors wrap ErrListen.
func (s *Server) startAdmin(sm *admin.SyncMetrics) error {
	if s.opts.HTTPListen == "" {
		return nil
	}
	name := s.opts.ServerName
	if name == "" {
		name = s.id
	}
	srv, err := admin.New(admin.Options{
		Addr:         s.opts.HTTPListen,
		Broker:       s.Broker,
		Conns:        s,
		Authenticate: s.adminAuth(),
		ServerName:   name,
		Version:      Version,
		Sync:         sm,
		Stages:       s.stages(),
		Cluster:      s.adminCluster(),
	})
	if err != nil {
		return fmt.Errorf("%w: admin %s: %w", ErrListen, s.opts.HTTPListen, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	al := &adminListener{srv: srv, stop: cancel, done: make(chan error, 1)}
	go func() { al.done <- srv.Serve(ctx) }()
	s.admin = al
	return nil
}

// stopAdmin shuts the admin listener down and waits for it.
func (s *Server) stopAdmin() {
	if s.admin == nil {
		return
	}
	s.admin.stop()
	if err := <-s.admin.done; err != nil {
		s.log.Warn("admin listener", "err", err)
	}
}

// adminAuth mirrors the server's client authentication on HTTP, with the
// same identities; passwords go through the same cache and check queue
// (passwords.go).
func (s *Server) adminAuth() admin.Authenticator {
	var pc admin.PasswordChecker
	if len(s.opts.Users) > 0 {
		pc = adminPasswords{s}
	}
	return admin.AnyAuth(admin.TokenAuth(s.opts.Token), admin.BasicAuth(pc))
}
