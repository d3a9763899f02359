package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/fibrilmq/fibril/server/broker"
)

// RequeueGroup is the consumer group of a dead-letter topic through which
// requeues take its messages (broker.RequeueGroup, "$requeue", created on
// first use; internal: no listing shows it).
// Under workqueue retention a dead-letter message is deleted once every
// group of that topic settled it, so a requeued message leaves the
// dead-letter topic (unless another group there still holds it).
const RequeueGroup = string(broker.RequeueGroup)

// RequeueResult answers POST /api/topics/{name}/requeue.
type RequeueResult struct {
	// Requeued were published again to the topic that captures their
	// original subject and then settled in the dead-letter topic.
	Requeued int `json:"requeued"`
	// Skipped have no Fibril-Subject header or no topic captures it now
	// (its topic was deleted: deleting a topic leaves its dead-letter
	// topics); they stay in the dead-letter topic, and Error says why.
	Skipped int    `json:"skipped"`
	Error   string `json:"error,omitempty"`
}

// requeueRequest is TOPIC REQUEUE's selection (SPEC.md 10): max, filter
// on the original subject, offset range.
type requeueRequest struct {
	Max     int      `json:"max"`
	Filter  []string `json:"filter"`
	FromSeq uint64   `json:"from_seq"`
	ToSeq   uint64   `json:"to_seq"`
	To      string   `json:"to"`
}

// handleRequeue moves up to max messages of a dead-letter topic (those
// filter and the offset range pick, as TOPIC REQUEUE does) back to the
// topics that capture their original subjects. Each is published first and
// acked in the dead-letter topic after, so a crash in between duplicates a
// message rather than losing it.
func (s *Server) handleRequeue(w http.ResponseWriter, r *http.Request, b *broker.Broker) {
	if !jsonPost(w, r) {
		return
	}
	req := requeueRequest{Max: 1000}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "bad JSON body: "+err.Error())
		return
	}
	if req.Max < 1 || req.Max > 100000 {
		writeError(w, http.StatusBadRequest, "max must be within 1..100000")
		return
	}
	name := r.PathValue("name")
	if !isDeadLetter(name) {
		writeError(w, http.StatusBadRequest, "not a dead-letter topic: "+name)
		return
	}
	if _, ok := b.Topic(broker.TopicName(name)); !ok {
		writeError(w, http.StatusNotFound, "no topic "+name)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	sel := broker.RequeueSelect{Max: req.Max, Filter: req.Filter, FromSeq: broker.Seq(req.FromSeq), ToSeq: broker.Seq(req.ToSeq), To: broker.TopicName(req.To)}
	if err := sel.Check(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	moved, err := b.RequeueSelected(ctx, broker.TopicName(name), sel)
	res := RequeueResult{Requeued: moved}
	status := http.StatusOK
	switch {
	case err == nil:
	case errors.Is(err, broker.ErrNoTopic), errors.Is(err, broker.ErrInvalid):
		// A dead letter with no Fibril-Subject or whose subject no topic
		// captures now: it stays (put back), the requeue stops there.
		res.Skipped = 1
		res.Error = err.Error()
	default:
		res.Error = err.Error()
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, res)
}
