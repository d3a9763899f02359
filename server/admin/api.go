package admin

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
)

// routes builds the mux. Every path but /healthz and /readyz goes through
// authentication (authorized) and then its endpoint's permission check
// (guard; SPEC.md 6.1).
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		b := s.opts.Broker()
		if b == nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "engine not open"})
			return
		}
		if df, full := b.DiskFull(); full {
			// Publishes are refused until the disk has room again.
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "disk full", "disk_full": df})
			return
		}
		d, sc := b.Damaged(), b.ScrubStatus()
		if len(d) > 0 || len(sc.Damage) > 0 {
			// Groups stopped at a damaged record, or damage the scrub
			// found, wait for an operator.
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "damaged data", "damaged": d, "scrub_damage": sc.Damage})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})

	api := http.NewServeMux()
	for _, e := range s.endpoints() {
		api.Handle(e.pattern, guard(e.action, e.h))
	}
	mux.Handle("/", s.authorized(api))
	return mux
}

// endpoint is one authenticated route and the action it needs.
type endpoint struct {
	pattern string
	// action is checked by guard before the handler runs; 0 is "any
	// identity" (the dashboard, and the topic list, which filters itself).
	action access.Action
	h      http.Handler
}

// endpoints lists every authenticated route. Topic-scoped actions are
// checked by name here and again, by the handler (topicFor), against the
// topic as found.
func (s *Server) endpoints() []endpoint {
	var metrics http.Handler
	if reg, err := newRegistry(s); err != nil {
		// The collectors are fixed at compile time; a failure is a bug in
		// this package, reported on every scrape rather than by a panic.
		metrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "admin: metrics registry: "+err.Error(), http.StatusInternalServerError)
		})
	} else {
		metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	b := s.withBroker
	return []endpoint{
		{"GET /metrics", access.ViewMetrics, metrics},
		{"GET /api/topics", 0, b(s.handleTopics)},
		{"GET /api/topics/{name}", access.ViewTopic, b(s.handleTopic)},
		{"GET /api/topics/{name}/groups/{group}", access.ViewTopic, b(s.handleGroup)},
		{"POST /api/topics/{name}/requeue", access.Operate, b(s.handleRequeue)},
		{"POST /api/topics/{name}/purge", access.Operate, b(s.handlePurge)},
		{"POST /api/topics/{name}/groups/{group}/pause", access.Operate, b(s.handlePause(true))},
		{"POST /api/topics/{name}/groups/{group}/resume", access.Operate, b(s.handlePause(false))},
		{"GET /api/topics/{name}/partitions/{p}/messages", access.ReadMessages, b(s.handleMessages)},
		{"GET /api/topics/{name}/partitions/{p}/messages/{seq}/history", access.ReadMessages, b(s.handleHistory)},
		{"GET /api/topics/{name}/partitions/{p}/events", access.ReadMessages, b(s.handleEvents)},
		{"GET /api/connections", access.ViewConnections, http.HandlerFunc(s.handleConnections)},
		{"GET /api/cluster", access.ViewMetrics, b(s.handleCluster)},
		{"GET /{$}", 0, http.HandlerFunc(s.handleDashboard)},
		{"GET /ui/", 0, s.staticHandler()},
	}
}

// guard answers 403 unless the caller may do action: on the topic the
// path names ({name}, checked by name before any lookup), or on none.
func guard(action access.Action, h http.Handler) http.Handler {
	if action == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var t *access.Topic
		if name := r.PathValue("name"); name != "" {
			t = &access.Topic{Name: name}
		}
		if !identityOf(r).Can(action, t) {
			writeError(w, http.StatusForbidden, "permission denied")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// authorized identifies the caller (401 without valid credentials) and
// passes its identity on in the request's context.
func (s *Server) authorized(h http.Handler) http.Handler {
	if s.opts.Authenticate == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := s.opts.Authenticate(r)
		switch {
		case err == nil:
		case errors.Is(err, ErrNoCredentials), errors.Is(err, ErrBadCredentials):
			w.Header().Set("WWW-Authenticate", `Basic realm="fibril admin"`)
			writeError(w, http.StatusUnauthorized, "authorization required")
			return
		default: // busy, or the request ended while its check waited
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "password checks busy: retry")
			return
		}
		h.ServeHTTP(w, withIdentity(r, id))
	})
}

// withBroker answers 503 while the engine is not open.
func (s *Server) withBroker(h func(http.ResponseWriter, *http.Request, *broker.Broker)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b := s.opts.Broker()
		if b == nil {
			writeError(w, http.StatusServiceUnavailable, "engine not open")
			return
		}
		h(w, r, b)
	}
}

func (s *Server) handleTopics(w http.ResponseWriter, r *http.Request, b *broker.Broker) {
	writeJSON(w, http.StatusOK, overview(b, s.opts.ServerName, s.opts.Conns, identityOf(r)))
}

func (s *Server) handleTopic(w http.ResponseWriter, r *http.Request, b *broker.Broker) {
	t, ok := topicFor(w, r, b, access.ViewTopic)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, topicStats(t))
}

func (s *Server) handleGroup(w http.ResponseWriter, r *http.Request, b *broker.Broker) {
	t, ok := topicFor(w, r, b, access.ViewTopic)
	if !ok {
		return
	}
	g, ok := t.FindGroup(broker.GroupName(r.PathValue("group")))
	if !ok {
		writeError(w, http.StatusNotFound, "no group "+r.PathValue("group")+" in topic "+r.PathValue("name"))
		return
	}
	writeJSON(w, http.StatusOK, groupStats(g, published(t)))
}

func (s *Server) handleConnections(w http.ResponseWriter, r *http.Request) {
	if s.opts.Conns == nil {
		writeError(w, http.StatusNotImplemented, "connection listing not available")
		return
	}
	list := s.opts.Conns.Connections()
	if list == nil {
		list = []ConnInfo{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"connections": list})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away: nothing to do
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
