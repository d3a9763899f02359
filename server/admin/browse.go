package admin

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
)

// The event-log browser: a partition's messages by offset or time, its
// consumer-state events, and one message's history. Every read runs on the
// partition's actor through the engine's Browse/Events/History (bounded by
// browseTimeout), which copy what they return.

const (
	browseTimeout  = 10 * time.Second
	browseDefault  = 50
	browseMaxLimit = 500
	// bodyPreview bounds the payload shown per message in a listing.
	bodyPreview = 4 << 10
)

// MessageView is one stored message as the browser shows it.
type MessageView struct {
	Partition uint32    `json:"partition"`
	Seq       uint64    `json:"seq"`
	Subject   string    `json:"subject"`
	Time      time.Time `json:"time"`
	CRC       string    `json:"crc"`
	Size      int       `json:"size"`
	Header    string    `json:"header,omitempty"`
	// Data is the payload (at most 4 KiB of it; Truncated says so) as text
	// when it is UTF-8, else base64 with Encoding "base64".
	Data      string `json:"data"`
	Encoding  string `json:"encoding,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// MessagePage answers GET .../partitions/{p}/messages.
type MessagePage struct {
	Topic     string        `json:"topic"`
	Partition uint32        `json:"partition"`
	Messages  []MessageView `json:"messages"`
	// Next is the offset to ask for next (from=Next).
	Next uint64 `json:"next"`
}

// EventView is one consumer-state event; GroupName resolves Group when the
// group still exists. For an event with an Owner (a connection id, as the
// server uses them), OwnerLabel names it ("conn 17 (worker-a,
// 127.0.0.1:51234)", just "conn 17" once the server has forgotten it) and
// Conn has the details when the ConnSource resolves it (see ConnResolver).
type EventView struct {
	broker.StateEvent
	GroupName  string   `json:"group_name,omitempty"`
	OwnerLabel string   `json:"owner_label,omitempty"`
	Conn       *ConnRef `json:"conn,omitempty"`
}

// EventPage answers GET .../partitions/{p}/events.
type EventPage struct {
	Topic     string      `json:"topic"`
	Partition uint32      `json:"partition"`
	Events    []EventView `json:"events"`
	Next      uint64      `json:"next"` // the event record to ask for next
}

// History answers GET .../partitions/{p}/messages/{seq}/history.
type History struct {
	Topic     string       `json:"topic"`
	Partition uint32       `json:"partition"`
	Seq       uint64       `json:"seq"`
	Message   *MessageView `json:"message,omitempty"` // nil: no longer retained
	Events    []EventView  `json:"events"`
}

func messageView(m broker.StoredMessage) MessageView {
	v := MessageView{
		Partition: uint32(m.Partition), Seq: uint64(m.Seq), Subject: m.Subject, Time: m.Time.UTC(),
		CRC: strconv.FormatUint(uint64(m.CRC)|1<<32, 16)[1:], Size: len(m.Header) + len(m.Data),
	}
	if utf8.Valid(m.Header) {
		v.Header = string(m.Header)
	}
	data := m.Data
	if len(data) > bodyPreview {
		data, v.Truncated = data[:bodyPreview], true
	}
	if utf8.Valid(data) {
		v.Data = string(data)
	} else {
		v.Data, v.Encoding = base64.StdEncoding.EncodeToString(data), "base64"
	}
	return v
}

// partitionParam reads {name} and {p} of a topic whose messages the
// caller may read; it answers 403/404/400 itself.
func partitionParam(w http.ResponseWriter, r *http.Request, b *broker.Broker) (*broker.Topic, broker.Partition, bool) {
	t, ok := topicFor(w, r, b, access.ReadMessages)
	if !ok {
		return nil, 0, false
	}
	p, err := strconv.ParseUint(r.PathValue("p"), 10, 32)
	if err != nil || int(p) >= t.Config().Partitions {
		writeError(w, http.StatusNotFound, "no partition "+r.PathValue("p")+" in topic "+r.PathValue("name"))
		return nil, 0, false
	}
	return t, broker.Partition(p), true
}

// queryUint reads an optional unsigned query parameter.
func queryUint(w http.ResponseWriter, r *http.Request, key string, def uint64) (uint64, bool) {
	s := r.URL.Query().Get(key)
	if s == "" {
		return def, true
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, key+": not a non-negative integer: "+strconv.Quote(s))
		return 0, false
	}
	return n, true
}

func limitParam(w http.ResponseWriter, r *http.Request) (int, bool) {
	n, ok := queryUint(w, r, "limit", browseDefault)
	if !ok {
		return 0, false
	}
	if n < 1 || n > browseMaxLimit {
		writeError(w, http.StatusBadRequest, "limit must be within 1.."+strconv.Itoa(browseMaxLimit))
		return 0, false
	}
	return int(n), true
}

// parseTime accepts RFC 3339 or unix milliseconds.
func parseTime(s string) (time.Time, bool) {
	if tm, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return tm, true
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), true
	}
	return time.Time{}, false
}

// pageParams reads what both paged views take: the partition, ?limit= and
// ?from=. It answers the error itself and reports false on bad input.
func pageParams(w http.ResponseWriter, r *http.Request, b *broker.Broker) (t *broker.Topic, p broker.Partition, limit int, from uint64, ok bool) {
	if t, p, ok = partitionParam(w, r, b); !ok {
		return
	}
	if limit, ok = limitParam(w, r); !ok {
		return
	}
	from, ok = queryUint(w, r, "from", 0)
	return
}

// handleMessages serves GET /api/topics/{name}/partitions/{p}/messages
// ?from=<seq>|time=<RFC3339 or unix ms>&limit=<n>.
func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request, b *broker.Broker) {
	t, p, limit, from, ok := pageParams(w, r, b)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), browseTimeout)
	defer cancel()
	if ts := r.URL.Query().Get("time"); ts != "" {
		tm, ok := parseTime(ts)
		if !ok {
			writeError(w, http.StatusBadRequest, "time: want RFC 3339 or unix milliseconds: "+strconv.Quote(ts))
			return
		}
		at, err := t.SeqAt(ctx, p, tm)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		from = uint64(at)
	}
	ms, next, err := t.Browse(ctx, p, broker.Seq(from), limit)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	page := MessagePage{Topic: string(t.Name()), Partition: uint32(p), Messages: make([]MessageView, 0, len(ms)), Next: uint64(next)}
	for _, m := range ms {
		page.Messages = append(page.Messages, messageView(m))
	}
	writeJSON(w, http.StatusOK, page)
}

// groupNames maps the topic's group ids to names.
func groupNames(t *broker.Topic) map[broker.GroupID]string {
	m := make(map[broker.GroupID]string)
	for _, g := range t.Groups() {
		m[g.ID()] = string(g.Name())
	}
	return m
}

// eventViews resolves group names and owners (each owner once); the
// connection behind an owner (user, address) only for callers that may
// list connections.
func (s *Server) eventViews(r *http.Request, t *broker.Topic, evs []broker.StateEvent) []EventView {
	names := groupNames(t)
	res, _ := s.opts.Conns.(ConnResolver)
	if !identityOf(r).Can(access.ViewConnections, nil) {
		res = nil
	}
	conns := make(map[broker.OwnerID]*ConnRef)
	out := make([]EventView, 0, len(evs))
	for _, e := range evs {
		v := EventView{StateEvent: e, GroupName: names[e.Group]}
		if e.Owner != 0 {
			ref, seen := conns[e.Owner]
			if !seen && res != nil {
				if r, ok := res.LookupConn(uint64(e.Owner)); ok {
					ref = &r
				}
				conns[e.Owner] = ref
			}
			v.Conn = ref
			if ref != nil {
				v.OwnerLabel = ref.Label()
			} else {
				v.OwnerLabel = "conn " + strconv.FormatUint(uint64(e.Owner), 10)
			}
		}
		out = append(out, v)
	}
	return out
}

// handleEvents serves GET /api/topics/{name}/partitions/{p}/events
// ?from=<record>&limit=<n>.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, b *broker.Broker) {
	t, p, limit, from, ok := pageParams(w, r, b)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), browseTimeout)
	defer cancel()
	evs, next, err := t.Events(ctx, p, broker.Seq(from), limit)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, EventPage{Topic: string(t.Name()), Partition: uint32(p), Events: s.eventViews(r, t, evs), Next: uint64(next)})
}

// handleHistory serves GET /api/topics/{name}/partitions/{p}/messages/{seq}/history.
func (s *Server) handleHistory(w http.ResponseWriter, r *http.Request, b *broker.Broker) {
	t, p, ok := partitionParam(w, r, b)
	if !ok {
		return
	}
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || seq == 0 {
		writeError(w, http.StatusBadRequest, "seq: want a positive integer")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), browseTimeout)
	defer cancel()
	h := History{Topic: string(t.Name()), Partition: uint32(p), Seq: seq}
	ms, _, err := t.Browse(ctx, p, broker.Seq(seq), 1)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if len(ms) == 1 && uint64(ms[0].Seq) == seq {
		v := messageView(ms[0])
		h.Message = &v
	}
	evs, err := t.History(ctx, p, broker.Seq(seq))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	h.Events = s.eventViews(r, t, evs)
	writeJSON(w, http.StatusOK, h)
}
