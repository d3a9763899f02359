package admin

import (
	"context"
	"mime"
	"net/http"
	"time"

	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
)

// Operator actions: pause/resume a group, purge a topic. They are POSTs
// that must carry Content-Type: application/json (see jsonPost), behind the
// same authentication as the rest of the API; they need the admin role
// (access.Operate).

// opTimeout bounds one operator action's wait on the engine.
const opTimeout = 20 * time.Second

// jsonPost answers 415 unless r has a JSON content type. A JSON content
// type cannot be sent cross-site without a CORS preflight, which this
// listener never grants: it guards state changes against a form on another
// site riding on cached credentials.
func jsonPost(w http.ResponseWriter, r *http.Request) bool {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "POST with Content-Type: application/json")
		return false
	}
	return true
}

// findGroup answers 403 unless the caller may operate, 404 for a missing
// topic or group.
func findGroup(w http.ResponseWriter, r *http.Request, b *broker.Broker) (*broker.Topic, *broker.Group, bool) {
	t, ok := topicFor(w, r, b, access.Operate)
	if !ok {
		return nil, nil, false
	}
	g, ok := t.FindGroup(broker.GroupName(r.PathValue("group")))
	if !ok {
		writeError(w, http.StatusNotFound, "no group "+r.PathValue("group")+" in topic "+r.PathValue("name"))
		return nil, nil, false
	}
	return t, g, true
}

// handlePause serves POST .../groups/{group}/pause and .../resume.
func (s *Server) handlePause(pause bool) func(http.ResponseWriter, *http.Request, *broker.Broker) {
	return func(w http.ResponseWriter, r *http.Request, b *broker.Broker) {
		if !jsonPost(w, r) {
			return
		}
		t, g, ok := findGroup(w, r, b)
		if !ok {
			return
		}
		op := g.Resume
		if pause {
			op = g.Pause
		}
		if err := op(); err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, groupStats(g, published(t)))
	}
}

// handlePurge serves POST /api/topics/{name}/purge.
func (s *Server) handlePurge(w http.ResponseWriter, r *http.Request, b *broker.Broker) {
	if !jsonPost(w, r) {
		return
	}
	t, ok := topicFor(w, r, b, access.Operate)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	if err := t.Purge(ctx); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, topicStats(t))
}

// published is the topic's Published count (sum of last sequences).
func published(t *broker.Topic) uint64 {
	var n uint64
	for _, p := range t.Info().Partitions {
		n += uint64(p.LastSeq)
	}
	return n
}
