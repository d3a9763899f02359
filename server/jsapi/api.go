package jsapi

// SPEC.md 16.2 "The JetStream API": request routing, answers, and the
// bindings to the engine and to the requesting connection.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
)

// Engine is what the API needs of the engine; *broker.Broker implements it.
type Engine interface {
	Topic(name broker.TopicName) (*broker.Topic, bool)
	Topics() []*broker.Topic
	CreateTopic(name broker.TopicName, cfg broker.TopicConfig) (*broker.Topic, error)
	DeleteTopic(name broker.TopicName) error
}

// Requester is the connection a request came from.
type Requester interface {
	// Identity decides what the request may do (never nil).
	Identity() *access.Identity
	// Owner is the lease owner for the deliveries of pull requests.
	Owner() broker.OwnerID
	// Send delivers one message with subject, reply, header block (nil:
	// none) and data to the plain subscriptions matching to, copying what
	// it keeps. It reports false when nobody took it (no subscription, or
	// the connection is closing or over its output bound). Safe from any
	// goroutine.
	Send(to, subject, reply string, hdr, data []byte) bool
	// SendBatch is Send of every message of msgs, in order, encoded
	// together (one subscription match, few copies): the deliveries of one
	// poll of a pull request. It reports false when nobody took them.
	SendBatch(to string, msgs []Msg) bool
	// Context ends when the connection closes.
	Context() context.Context
}

// Msg is one message of a Requester.SendBatch: a delivery of a pull
// request, with its ack subject as the reply. Everything is borrowed until
// SendBatch returns.
type Msg struct {
	Subject      string
	Reply        []byte
	Header, Data []byte // Header nil: none
}

// Options configures the API.
type Options struct {
	// Dir keeps the JetStream settings the engine does not (meta.go).
	Dir string
	// MaxWaitingPulls bounds the pull requests waiting at once over all
	// consumers (each holds a goroutine); past it a request is answered
	// 409 Exceeded MaxWaiting. Default 4096.
	MaxWaitingPulls int
	// MaxConsumers bounds the consumers one stream may have (ephemeral
	// ones included). Default 1024.
	MaxConsumers int
	// Log receives what an operator should know (nil: discarded).
	Log *slog.Logger
}

// API serves the JetStream API. Its methods are safe for concurrent use.
type API struct {
	eng  Engine
	opts Options
	log  *slog.Logger
	meta *metaStore

	mu    sync.Mutex
	state map[consumerKey]*consumerState // in-memory consumer counters

	waiting  atomic.Int64 // pull requests waiting, all consumers
	total    atomic.Uint64
	errCount atomic.Uint64

	quit chan struct{}
	wg   sync.WaitGroup
}

// New opens the API's settings in opts.Dir, deletes the ephemeral
// consumers a previous run left, and starts the janitor that deletes
// ephemeral consumers idle past their inactive threshold.
func New(eng Engine, opts Options) (*API, error) {
	if opts.MaxWaitingPulls == 0 {
		opts.MaxWaitingPulls = 4096
	}
	if opts.MaxConsumers == 0 {
		opts.MaxConsumers = 1024
	}
	if opts.MaxWaitingPulls < 1 || opts.MaxConsumers < 1 {
		return nil, errors.New("jsapi: MaxWaitingPulls and MaxConsumers must be positive")
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := openMeta(opts.Dir)
	if err != nil {
		return nil, err
	}
	a := &API{eng: eng, opts: opts, log: log, meta: m, state: map[consumerKey]*consumerState{}, quit: make(chan struct{})}
	for _, k := range m.ephemerals() {
		a.dropConsumer(k)
	}
	a.wg.Add(1)
	go a.janitor()
	return a, nil
}

// Close stops the janitor. Pull requests end with their connections.
func (a *API) Close() {
	close(a.quit)
	a.wg.Wait()
}

const apiPrefix = "$JS.API."

// IsAPI reports whether subject is a JetStream API request subject.
func IsAPI(subject string) bool { return strings.HasPrefix(subject, apiPrefix) }

// Request serves one `$JS.API.*` request. It may block on the disk
// (creating a stream, writing settings): call it where that is allowed.
// hdr and body are borrowed until it returns. A request without a reply
// subject is served and not answered (as nats-server does).
func (a *API) Request(r Requester, subject, reply string, hdr, body []byte) {
	a.total.Add(1)
	v, e := a.route(r, strings.TrimPrefix(subject, apiPrefix), reply, body)
	if v == nil && e == nil {
		return // answered by the handler (pull requests)
	}
	if reply == "" {
		return
	}
	if e != nil {
		a.errCount.Add(1)
		v = errorResponse{response{Type: "io.nats.jetstream.api.v1.error_response", Error: e}}
	}
	out, err := json.Marshal(v)
	if err != nil {
		out, _ = json.Marshal(errorResponse{response{Error: errInternal(err)}})
	}
	r.Send(reply, reply, "", nil, out)
}

type errorResponse struct{ response }

// route dispatches by the API subject's tokens.
func (a *API) route(r Requester, sub, reply string, body []byte) (any, *APIError) {
	tok := strings.Split(sub, ".")
	arg := func(i int) string {
		if i < len(tok) {
			return tok[i]
		}
		return ""
	}
	id := r.Identity()
	switch {
	case sub == "INFO":
		return a.accountInfo(id), nil
	case len(tok) == 3 && tok[0] == "STREAM":
		switch tok[1] {
		case "CREATE":
			return a.streamCreate(id, arg(2), body, false)
		case "UPDATE":
			return a.streamCreate(id, arg(2), body, true)
		case "INFO":
			return a.streamInfo(id, arg(2))
		case "DELETE":
			return a.streamDelete(id, arg(2))
		case "PURGE":
			return a.streamPurge(id, arg(2), body)
		}
	case sub == "STREAM.NAMES" || sub == "STREAM.LIST":
		return a.streamList(id, tok[1] == "LIST", body)
	case len(tok) == 4 && tok[0] == "STREAM" && tok[1] == "MSG" && tok[2] == "GET":
		return a.msgGet(r, tok[3], body)
	case len(tok) >= 3 && tok[0] == "CONSUMER" && tok[1] == "CREATE":
		// CREATE.<stream> (ephemeral), CREATE.<stream>.<name>[.<filter>]
		filter := ""
		if len(tok) > 4 {
			filter = strings.Join(tok[4:], ".")
		}
		return a.consumerCreate(id, tok[2], arg(3), filter, false, body)
	case len(tok) == 5 && tok[0] == "CONSUMER" && tok[1] == "DURABLE" && tok[2] == "CREATE":
		return a.consumerCreate(id, tok[3], tok[4], "", true, body)
	case len(tok) == 4 && tok[0] == "CONSUMER" && tok[1] == "INFO":
		return a.consumerInfo(id, tok[2], tok[3])
	case len(tok) == 4 && tok[0] == "CONSUMER" && tok[1] == "DELETE":
		return a.consumerDelete(id, tok[2], tok[3])
	case len(tok) == 3 && tok[0] == "CONSUMER" && (tok[1] == "NAMES" || tok[1] == "LIST"):
		return a.consumerList(id, tok[2], tok[1] == "LIST", body)
	case len(tok) == 5 && tok[0] == "CONSUMER" && tok[1] == "MSG" && tok[2] == "NEXT":
		if e := a.Next(r, tok[3], tok[4], reply, body); e != nil {
			return nil, e
		}
		return nil, nil
	}
	return nil, errNotSupported(10003, "$JS.API."+sub)
}

// accountInfo answers $JS.API.INFO.
func (a *API) accountInfo(id *access.Identity) any {
	var streams, consumers int
	var bytes uint64
	for _, t := range a.eng.Topics() {
		if !streamName(string(t.Name())) || !id.SeeTopic(accessTopic(t)) {
			continue
		}
		streams++
		consumers += len(t.Groups())
		in := t.Info()
		bytes += uint64(in.Bytes)
	}
	return struct {
		response
		Memory    uint64        `json:"memory"`
		Store     uint64        `json:"storage"`
		Streams   int           `json:"streams"`
		Consumers int           `json:"consumers"`
		Limits    accountLimits `json:"limits"`
		API       apiStats      `json:"api"`
	}{
		response: response{Type: "io.nats.jetstream.api.v1.account_info_response"},
		Store:    bytes, Streams: streams, Consumers: consumers,
		Limits: accountLimits{MaxMemory: -1, MaxStore: -1, MaxStreams: -1, MaxConsumers: -1,
			MaxAckPending: -1, MemMaxStream: -1, StoreMaxStrm: -1},
		API: apiStats{Total: a.total.Load(), Errors: a.errCount.Load()},
	}
}

// accessTopic is what a permission decision needs of t.
func accessTopic(t *broker.Topic) access.Topic {
	return access.Topic{Name: string(t.Name()), Subjects: t.Subjects()}
}

// lookup finds stream name for id: denied before the lookup when the bare
// name may not be seen (so a refusal never tells whether it exists), not
// found, then check on the topic as found.
func (a *API) lookup(id *access.Identity, name string, check func(access.Topic) error) (*broker.Topic, *APIError) {
	if !streamName(name) {
		return nil, errStreamNotFound()
	}
	if !id.SeeName(name) {
		return nil, errDenied("stream " + name)
	}
	t, ok := a.eng.Topic(broker.TopicName(name))
	if !ok {
		return nil, errStreamNotFound()
	}
	if err := check(accessTopic(t)); err != nil {
		return nil, errDenied(err.Error())
	}
	return t, nil
}

// see turns Identity.SeeTopic into a check.
func see(id *access.Identity) func(access.Topic) error {
	return func(t access.Topic) error {
		if !id.SeeTopic(t) {
			return fmt.Errorf("stream %s", t.Name)
		}
		return nil
	}
}

// streamName reports whether s is a name this API serves as a stream or
// consumer name: letters, digits, '-' and '_', at most 255 bytes (no
// '.', wildcard, space or path separator; nothing in the `$` space).
func streamName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// paged answers NAMES/LIST pages of JetStream's size.
const pageSize = 256

func page[T any](all []T, offset int) []T {
	if offset < 0 || offset >= len(all) {
		return []T{}
	}
	return all[offset:min(len(all), offset+pageSize)]
}

func decode(body []byte, v any) *APIError {
	if len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return errInvalidJSON(err)
	}
	return nil
}

func nowUTC() time.Time { return time.Now().UTC() }

// Refuse answers a request that could not be served now (the connection
// has too many commands waiting) with JetStream's error JSON.
func (a *API) Refuse(r Requester, reply, why string) {
	if reply == "" {
		return
	}
	a.errCount.Add(1)
	out, _ := json.Marshal(errorResponse{response{Type: "io.nats.jetstream.api.v1.error_response",
		Error: apiErr(503, 10003, "%s", why)}})
	r.Send(reply, reply, "", nil, out)
}
