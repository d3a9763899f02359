package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/broker"
)

// RequeueGroup is the consumer group the admin listener creates on a
// dead-letter topic to move its messages back. Under workqueue retention a
// dead-letter message is deleted once every group of that topic settled it,
// so a requeued message leaves the dead-letter topic (unless another group
// there still holds it).
const RequeueGroup = "fibril-requeue"

// skipDelay is how long a dead letter whose subject no topic captures any
// more waits before the requeue group sees it again.
const skipDelay = time.Minute

// dlqHeaders are the fields the engine adds when it dead-letters a message.
var dlqHeaders = []string{"Fibril-Reason", "Fibril-Subject", "Fibril-Partition", "Fibril-Seq", "Fibril-Deliveries"}

// RequeueResult answers POST /api/topics/{name}/requeue.
type RequeueResult struct {
	// Requeued were published again to the topic that captures their
	// original subject and then settled in the dead-letter topic.
	Requeued int `json:"requeued"`
	// Skipped have no Fibril-Subject header or no topic captures it now;
	// they stay in the dead-letter topic.
	Skipped int    `json:"skipped"`
	Error   string `json:"error,omitempty"`
}

type requeueRequest struct {
	Max int `json:"max"`
}

// handleRequeue moves up to max messages of a dead-letter topic back to the
// topics that capture their original subjects. Each is published first and
// acked in the dead-letter topic after, so a crash in between duplicates a
// message rather than losing it.
func (s *Server) handleRequeue(w http.ResponseWriter, r *http.Request, b *broker.Broker) {
	// A JSON content type cannot be sent cross-site without a CORS
	// preflight, which this listener never grants: it guards the POST
	// against a form on another site riding on cached credentials.
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "POST with Content-Type: application/json")
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
	t, ok := b.Topic(broker.TopicName(name))
	if !ok {
		writeError(w, http.StatusNotFound, "no topic "+name)
		return
	}
	g, err := t.Group(RequeueGroup, broker.GroupConfig{Start: broker.StartEarliest, MaxDeliveries: -1, DeadLetter: "-"})
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("create group %s on %s: %v", RequeueGroup, name, err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	res, err := requeue(ctx, b, g, req.Max)
	status := http.StatusOK
	if err != nil {
		res.Error = err.Error()
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, res)
}

// requeue does the work of handleRequeue with the requeue group g.
func requeue(ctx context.Context, b *broker.Broker, g *broker.Group, max int) (RequeueResult, error) {
	var res RequeueResult
	for res.Requeued+res.Skipped < max {
		ds, err := pollNow(g, min(max-res.Requeued-res.Skipped, 256))
		if err != nil {
			return res, fmt.Errorf("poll %s: %w", g.Topic().Name(), err)
		}
		if len(ds) == 0 {
			return res, nil
		}
		for _, d := range ds {
			subject, _ := protocol.HeaderValue(d.Header, "Fibril-Subject")
			var dest *broker.Topic
			if len(subject) > 0 {
				dest = b.Route(string(subject))
			}
			if dest == nil {
				res.Skipped++
				if err := d.Nack(ctx, skipDelay); err != nil {
					return res, fmt.Errorf("put back %s: %w", d.Handle, err)
				}
				continue
			}
			m := broker.Message{Subject: string(subject), Header: stripDLQHeader(d.Header), Data: d.Data}
			if k, ok := protocol.HeaderValue(m.Header, protocol.HeaderKey); ok {
				m.Key = k
			}
			if _, err := dest.Publish(ctx, m); err != nil {
				_ = d.Nack(ctx, 0) // try again on the next requeue
				return res, fmt.Errorf("publish to %s: %w", dest.Name(), err)
			}
			if err := d.Ack(ctx); err != nil {
				return res, fmt.Errorf("ack %s after publishing it again: %w", d.Handle, err)
			}
			res.Requeued++
		}
	}
	return res, nil
}

// pollNow returns up to max ready deliveries of g without waiting; they are
// copies the caller owns (leased to owner 0, "nobody in particular").
func pollNow(g *broker.Group, max int) ([]broker.Delivery, error) {
	type answer struct {
		ds  []broker.Delivery
		err error
	}
	ch := make(chan answer, 1)
	err := g.PollAsync(max, 0, 0, func(ds []broker.Delivery, err error) {
		out := make([]broker.Delivery, len(ds))
		for i, d := range ds {
			d.Subject = strings.Clone(d.Subject)
			d.Header = cloneBytes(d.Header)
			d.Data = cloneBytes(d.Data)
			out[i] = d
		}
		ch <- answer{out, err}
	})
	if err != nil {
		return nil, err
	}
	a := <-ch
	return a.ds, a.err
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// stripDLQHeader returns the header without the fields dead-lettering added,
// or nil when nothing else is left.
func stripDLQHeader(h []byte) []byte {
	var kv []string
	protocol.RangeHeader(h, func(k, v []byte) bool {
		for _, drop := range dlqHeaders {
			if strings.EqualFold(string(k), drop) {
				return true
			}
		}
		kv = append(kv, string(k), string(v))
		return true
	})
	if len(kv) == 0 {
		return nil
	}
	return protocol.AppendHeader(nil, kv...)
}
