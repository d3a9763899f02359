package admin

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
)

// routes builds the mux. Every path but /healthz and /readyz goes through
// the authorization check.
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
		if d := b.Damaged(); len(d) > 0 {
			// Groups stopped at a damaged record wait for an operator.
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "damaged data", "damaged": d})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})

	api := http.NewServeMux()
	reg, err := newRegistry(s)
	if err != nil {
		// The collectors are fixed at compile time; a failure is a bug in
		// this package, reported on every scrape rather than by a panic.
		api.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "admin: metrics registry: "+err.Error(), http.StatusInternalServerError)
		})
	} else {
		metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
		api.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
			if permit(w, r, access.ViewMetrics) {
				metrics.ServeHTTP(w, r)
			}
		})
	}
	api.HandleFunc("GET /api/topics", s.withBroker(s.handleTopics))
	api.HandleFunc("GET /api/topics/{name}", s.withBroker(s.handleTopic))
	api.HandleFunc("GET /api/topics/{name}/groups/{group}", s.withBroker(s.handleGroup))
	api.HandleFunc("POST /api/topics/{name}/requeue", s.withBroker(s.handleRequeue))
	api.HandleFunc("POST /api/topics/{name}/purge", s.withBroker(s.handlePurge))
	api.HandleFunc("POST /api/topics/{name}/groups/{group}/pause", s.withBroker(s.handlePause(true)))
	api.HandleFunc("POST /api/topics/{name}/groups/{group}/resume", s.withBroker(s.handlePause(false)))
	api.HandleFunc("GET /api/topics/{name}/partitions/{p}/messages", s.withBroker(s.handleMessages))
	api.HandleFunc("GET /api/topics/{name}/partitions/{p}/messages/{seq}/history", s.withBroker(s.handleHistory))
	api.HandleFunc("GET /api/topics/{name}/partitions/{p}/events", s.withBroker(s.handleEvents))
	api.HandleFunc("GET /api/connections", s.handleConnections)
	api.HandleFunc("GET /{$}", s.handleDashboard)
	api.Handle("GET /ui/", s.staticHandler())
	mux.Handle("/", s.authorized(api))
	return mux
}

// authorized identifies the caller (401 without valid credentials) and
// passes its identity on in the request's context.
func (s *Server) authorized(h http.Handler) http.Handler {
	if s.opts.Authenticate == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.opts.Authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="fibril admin"`)
			writeError(w, http.StatusUnauthorized, "authorization required")
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
	if !permit(w, r, access.ViewConnections) {
		return
	}
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
