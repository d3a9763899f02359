package jsapi

// SPEC.md 16.2: CONSUMER.CREATE / DURABLE.CREATE / INFO / DELETE / NAMES /
// LIST. A pull consumer is a group of the stream's topic; an ephemeral one
// is deleted once idle past its inactive threshold (janitor) and at the
// next start.

import (
	"crypto/rand"
	"errors"
	"math"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
)

// Defaults as JetStream's.
const (
	defaultAckWait       = 30 * time.Second
	defaultMaxWaiting    = 512
	defaultMaxAckPending = 1000
	defaultInactive      = 5 * time.Second
)

// consumerState is what the API counts of a consumer in memory.
type consumerState struct {
	cseq       atomic.Uint64 // deliveries made (the consumer sequence)
	waiting    atomic.Int64  // pull requests waiting
	lastActive atomic.Int64  // unix nanoseconds of the last pull request
}

func (a *API) stateOf(k consumerKey) *consumerState {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.state[k]
	if st == nil {
		st = &consumerState{}
		st.lastActive.Store(time.Now().UnixNano())
		a.state[k] = st
	}
	return st
}

func (a *API) forgetStream(name string) {
	a.mu.Lock()
	for k := range a.state {
		if k.stream == name {
			delete(a.state, k)
		}
	}
	a.mu.Unlock()
}

// withDefaults fills in JetStream's defaults and refuses what the engine
// cannot serve.
func (c ConsumerConfig) withDefaults() (ConsumerConfig, *APIError) {
	if c.DeliverPolicy == "" {
		c.DeliverPolicy = "all"
	}
	if c.AckPolicy == "" {
		c.AckPolicy = "explicit"
	}
	if c.ReplayPolicy == "" {
		c.ReplayPolicy = "instant"
	}
	if c.AckWait == 0 {
		c.AckWait = defaultAckWait
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = -1
	}
	if c.MaxWaiting == 0 {
		c.MaxWaiting = defaultMaxWaiting
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = defaultMaxAckPending
	}
	if c.Durable == "" && c.InactiveThreshold == 0 {
		c.InactiveThreshold = defaultInactive
	}
	const code = 10094
	switch {
	case c.DeliverSubject != "" || c.DeliverGroup != "" || c.FlowControl || c.Heartbeat != 0:
		return c, errNotSupported(code, "push consumers (deliver_subject, flow control, idle heartbeats on the consumer)")
	case c.AckPolicy != "explicit":
		return c, errNotSupported(code, "ack policy "+c.AckPolicy+" (explicit only)")
	case !slices.Contains([]string{"all", "new", "by_start_sequence", "by_start_time"}, c.DeliverPolicy):
		return c, errNotSupported(code, "deliver policy "+c.DeliverPolicy+" (all, new, by_start_sequence and by_start_time only)")
	case c.DeliverPolicy == "by_start_sequence" && c.OptStartSeq == 0:
		return c, errConsumerPolicy("consumer delivery policy is deliver by start sequence, but optional start sequence is not set")
	case c.DeliverPolicy == "by_start_time" && c.OptStartTime == nil:
		return c, errConsumerPolicy("consumer delivery policy is deliver by start time, but optional start time is not set")
	case c.OptStartSeq != 0 && c.DeliverPolicy != "by_start_sequence":
		return c, errConsumerPolicy("consumer delivery policy is %s, but optional start sequence is also set", c.DeliverPolicy)
	case c.OptStartTime != nil && c.DeliverPolicy != "by_start_time":
		return c, errConsumerPolicy("consumer delivery policy is %s, but optional start time is also set", c.DeliverPolicy)
	case c.OptStartSeq > math.MaxInt64:
		return c, errConsumerPolicy("opt_start_seq %d out of range", c.OptStartSeq)
	case len(c.BackOff) > 0:
		return c, errNotSupported(code, "backoff")
	case c.ReplayPolicy != "instant":
		return c, errNotSupported(code, "replay policy "+c.ReplayPolicy)
	case c.HeadersOnly || c.SampleFrequency != "" || c.RateLimit != 0:
		return c, errNotSupported(code, "headers_only, sampling and rate limits")
	case len(c.PriorityGroups) > 0 || (c.PriorityPolicy != "" && c.PriorityPolicy != "none") || (c.PauseUntil != nil && !c.PauseUntil.IsZero()):
		return c, errNotSupported(code, "priority groups and paused consumers")
	case c.MemoryStorage:
		return c, errNotSupported(code, "memory storage (ordered consumers)")
	case c.Replicas > 1:
		return c, errReplicas()
	case c.AckWait < time.Millisecond || c.AckWait > time.Duration(1<<32-1)*time.Millisecond:
		return c, errConsumerPolicy("ack_wait %v out of [1ms, 49d]", c.AckWait)
	case c.MaxWaiting < 0:
		return c, apiErr(400, 10087, "consumer max waiting needs to be positive")
	case c.FilterSubject != "" && len(c.FilterSubjects) > 0:
		return c, apiErr(400, 10136, "consumer cannot have both FilterSubject and FilterSubjects specified")
	}
	return c, nil
}

// narrowFilter returns the consumer's filter subjects when they do not
// cover every subject of the stream (the group's filter then), else nil:
// a covering filter is no filter, as for consumers made before groups had
// one.
func (c ConsumerConfig) narrowFilter(subjects []string) []string {
	filters := c.FilterSubjects
	if c.FilterSubject != "" {
		filters = []string{c.FilterSubject}
	}
	for _, s := range subjects {
		if !slices.ContainsFunc(filters, func(f string) bool { return access.Covers(f, s) }) {
			return filters
		}
	}
	return nil
}

// groupConfig is the engine configuration of a consumer.
func (c ConsumerConfig) groupConfig() broker.GroupConfig {
	gc := broker.GroupConfig{Start: broker.StartEarliest, LeaseMs: max(int64(c.AckWait/time.Millisecond), 1),
		MaxDeliveries: c.MaxDeliver, NATSAck: broker.NATSAckExplicit}
	switch c.DeliverPolicy {
	case "new":
		gc.Start = broker.StartNew
	case "by_start_sequence":
		gc.Start, gc.StartSeq = broker.StartSeq, int64(c.OptStartSeq) // withDefaults bounds it
	case "by_start_time":
		gc.Start, gc.StartTime = broker.StartTime, c.OptStartTime.UTC().Format(time.RFC3339Nano)
	}
	if gc.MaxDeliveries <= 0 {
		gc.MaxDeliveries = -1
	}
	return gc
}

// derivedConsumer describes a group created without this API.
func derivedConsumer(g *broker.Group) ConsumerConfig {
	gc := g.Config()
	c := ConsumerConfig{Durable: string(g.Name()), Name: string(g.Name()), DeliverPolicy: "all",
		AckWait: time.Duration(gc.LeaseMs) * time.Millisecond, MaxDeliver: gc.MaxDeliveries}
	switch gc.Start {
	case broker.StartNew:
		c.DeliverPolicy = "new"
	case broker.StartSeq:
		c.DeliverPolicy, c.OptStartSeq = "by_start_sequence", uint64(gc.StartSeq)
	case broker.StartTime:
		if tm, err := time.Parse(time.RFC3339Nano, gc.StartTime); err == nil {
			c.DeliverPolicy, c.OptStartTime = "by_start_time", &tm
		}
	}
	if len(gc.Filter) > 0 {
		c.FilterSubjects = gc.Filter
	}
	c, _ = c.withDefaults()
	return c
}

func (a *API) consumerConfigOf(stream string, g *broker.Group) (ConsumerConfig, time.Time) {
	if cm, ok := a.meta.consumer(consumerKey{stream, string(g.Name())}); ok {
		return cm.Config, cm.Created
	}
	return derivedConsumer(g), time.Time{}
}

// ephemeralName is a random consumer name, as nats-server gives one.
func ephemeralName() string {
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	var b [8]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return string(b[:])
}

func (a *API) consumerCreate(id *access.Identity, stream, name, filter string, durableAPI bool, body []byte) (any, *APIError) {
	var req createConsumerRequest
	if len(body) == 0 {
		return nil, apiErr(400, 10078, "consumer config required")
	}
	if e := decode(body, &req); e != nil {
		return nil, e
	}
	if req.Stream != "" && req.Stream != stream {
		return nil, errStreamMismatch()
	}
	cfg := req.Config
	switch {
	case durableAPI:
		if cfg.Durable != name {
			return nil, apiErr(400, 10016, "consumer expected to be durable but no durable name set in subject")
		}
	case name != "":
		if cfg.Name != "" && cfg.Name != name || cfg.Durable != "" && cfg.Durable != name {
			return nil, errDurableNameMismatch()
		}
		if cfg.FilterSubject != filter && (filter != "" || len(cfg.FilterSubjects) == 0 && cfg.FilterSubject != "") {
			return nil, errFilterMismatch()
		}
	default:
		if cfg.Durable != "" {
			return nil, apiErr(400, 10016, "consumer expected to be durable but no durable name set in subject")
		}
		name = cfg.Name
		if name == "" {
			name = ephemeralName()
		}
	}
	if cfg.Durable != "" && cfg.Name != "" && cfg.Durable != cfg.Name {
		return nil, errDurableNameMismatch()
	}
	if !streamName(name) {
		return nil, errConsumerPolicy("invalid consumer name %q (letters, digits, '-' and '_')", name)
	}
	cfg.Name = name
	ephemeral := cfg.Durable == ""
	t, e := a.lookup(id, stream, id.ConsumeTopic) // GROUP CREATE's rights
	if e != nil {
		return nil, e
	}
	scfg, _ := a.streamConfigOf(t)
	cfg, e = cfg.withDefaults()
	if e != nil {
		return nil, e
	}
	gc := cfg.groupConfig()
	gc.Filter = cfg.narrowFilter(t.Subjects())
	want, err := gc.Resolve(t.Name(), broker.GroupName(name))
	if err != nil {
		return nil, errConsumerPolicy("%v", err)
	}
	k := consumerKey{stream, name}
	if old, ok := t.FindGroup(broker.GroupName(name)); ok {
		oc, created := a.consumerConfigOf(stream, old)
		if req.Action == "create" && !reflect.DeepEqual(oc, cfg) {
			return nil, errConsumerExists()
		}
		if !want.Equal(old.Config()) {
			return nil, errNotSupported(10094, "changing ack_wait, max_deliver or deliver_policy of an existing consumer")
		}
		if created.IsZero() {
			created = nowUTC()
		}
		if err := a.meta.putConsumer(k, consumerMeta{Config: cfg, Created: created, Ephemeral: ephemeral}); err != nil {
			return nil, errInternal(err)
		}
		return a.consumerInfoOf(stream, old, "io.nats.jetstream.api.v1.consumer_create_response"), nil
	}
	if req.Action == "update" {
		return nil, errConsumerDoesNotExist()
	}
	limit := a.opts.MaxConsumers
	if scfg.MaxConsumers > 0 {
		limit = min(limit, scfg.MaxConsumers)
	}
	groups := t.Groups()
	if scfg.Retention == "workqueue" && slices.ContainsFunc(groups, func(g *broker.Group) bool { return streamName(string(g.Name())) }) {
		// Every group sees the whole topic: a second consumer would get
		// the same messages, which JetStream refuses on a work queue.
		return nil, apiErr(400, 10099, "multiple non-filtered consumers not allowed on workqueue stream")
	}
	if len(groups) >= limit {
		return nil, apiErr(400, 10026, "maximum consumers limit reached")
	}
	g, err := t.Group(broker.GroupName(name), gc)
	if errors.Is(err, broker.ErrInvalid) { // opt_start_seq beyond the stream's next sequence
		return nil, errConsumerPolicy("%v", err)
	}
	if err != nil {
		return nil, errConsumerCreate(err)
	}
	if err := a.meta.putConsumer(k, consumerMeta{Config: cfg, Created: nowUTC(), Ephemeral: ephemeral}); err != nil {
		return nil, errInternal(err)
	}
	a.stateOf(k).lastActive.Store(time.Now().UnixNano())
	return a.consumerInfoOf(stream, g, "io.nats.jetstream.api.v1.consumer_create_response"), nil
}

type consumerInfoResponse struct {
	response
	ConsumerInfo
}

func (a *API) consumerInfoOf(stream string, g *broker.Group, typ string) consumerInfoResponse {
	cfg, created := a.consumerConfigOf(stream, g)
	st := a.stateOf(consumerKey{stream, string(g.Name())})
	in := g.Info()
	ci := ConsumerInfo{Stream: stream, Name: string(g.Name()), Created: created, Config: cfg,
		NumAckPending: int(in.Inflight), NumRedelivered: int(in.Redelivered),
		NumWaiting: int(st.waiting.Load()), NumPending: uint64(max(in.Ready, 0)), TS: nowUTC()}
	cseq := st.cseq.Load()
	ci.Delivered.Consumer = cseq
	ci.AckFloor.Consumer = cseq - min(cseq, uint64(max(in.Inflight, 0)))
	if len(in.Partitions) > 0 {
		p := in.Partitions[0]
		if p.Next > 0 {
			ci.Delivered.Stream = uint64(p.Next - 1)
		}
		if p.Frontier > 0 {
			ci.AckFloor.Stream = uint64(p.Frontier - 1)
		}
	}
	return consumerInfoResponse{response{Type: typ}, ci}
}

// findConsumer looks a consumer up for id with check on its stream.
func (a *API) findConsumer(id *access.Identity, stream, name string, check func(access.Topic) error) (*broker.Topic, *broker.Group, *APIError) {
	t, e := a.lookup(id, stream, check)
	if e != nil {
		return nil, nil, e
	}
	g, ok := t.FindGroup(broker.GroupName(name))
	if !ok || !streamName(name) {
		return nil, nil, errConsumerNotFound()
	}
	return t, g, nil
}

func (a *API) consumerInfo(id *access.Identity, stream, name string) (any, *APIError) {
	_, g, e := a.findConsumer(id, stream, name, see(id))
	if e != nil {
		return nil, e
	}
	return a.consumerInfoOf(stream, g, "io.nats.jetstream.api.v1.consumer_info_response"), nil
}

func (a *API) consumerDelete(id *access.Identity, stream, name string) (any, *APIError) {
	t, _, e := a.findConsumer(id, stream, name, id.ConsumeTopic) // GROUP DELETE's rights
	if e != nil {
		return nil, e
	}
	if err := t.DeleteGroup(broker.GroupName(name)); err != nil {
		if errors.Is(err, broker.ErrNoGroup) {
			return nil, errConsumerNotFound()
		}
		return nil, errInternal(err)
	}
	a.forgetConsumer(consumerKey{stream, name})
	return successResponse{response: response{Type: "io.nats.jetstream.api.v1.consumer_delete_response"}, Success: true}, nil
}

func (a *API) forgetConsumer(k consumerKey) {
	a.mu.Lock()
	delete(a.state, k)
	a.mu.Unlock()
	if err := a.meta.dropConsumer(k); err != nil {
		a.log.Error("jetstream consumer settings not removed", "stream", k.stream, "consumer", k.consumer, "err", err)
	}
}

// dropConsumer deletes a consumer's group and settings (ephemerals).
func (a *API) dropConsumer(k consumerKey) {
	if t, ok := a.eng.Topic(broker.TopicName(k.stream)); ok {
		if err := t.DeleteGroup(broker.GroupName(k.consumer)); err != nil && !errors.Is(err, broker.ErrNoGroup) {
			a.log.Warn("ephemeral consumer not deleted", "stream", k.stream, "consumer", k.consumer, "err", err)
			return
		}
	}
	a.forgetConsumer(k)
}

func (a *API) consumerList(id *access.Identity, stream string, infos bool, body []byte) (any, *APIError) {
	var req pagedRequest
	if e := decode(body, &req); e != nil {
		return nil, e
	}
	t, e := a.lookup(id, stream, see(id))
	if e != nil {
		return nil, e
	}
	var all []*broker.Group
	for _, g := range t.Groups() {
		if streamName(string(g.Name())) {
			all = append(all, g)
		}
	}
	type paged struct {
		response
		Total  int `json:"total"`
		Offset int `json:"offset"`
		Limit  int `json:"limit"`
	}
	p := paged{Total: len(all), Offset: req.Offset, Limit: pageSize}
	if infos {
		p.Type = "io.nats.jetstream.api.v1.consumer_list_response"
		list := []ConsumerInfo{}
		for _, g := range page(all, req.Offset) {
			list = append(list, a.consumerInfoOf(stream, g, "").ConsumerInfo)
		}
		return struct {
			paged
			Consumers []ConsumerInfo `json:"consumers"`
		}{paged: p, Consumers: list}, nil
	}
	p.Type = "io.nats.jetstream.api.v1.consumer_names_response"
	names := []string{}
	for _, g := range page(all, req.Offset) {
		names = append(names, string(g.Name()))
	}
	return struct {
		paged
		Consumers []string `json:"consumers"`
	}{paged: p, Consumers: names}, nil
}

// janitor deletes ephemeral consumers idle past their inactive threshold.
func (a *API) janitor() {
	defer a.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-a.quit:
			return
		case <-tick.C:
		}
		now := time.Now().UnixNano()
		for _, k := range a.meta.ephemerals() {
			cm, ok := a.meta.consumer(k)
			if !ok {
				continue
			}
			st := a.stateOf(k)
			if st.waiting.Load() == 0 && now-st.lastActive.Load() > int64(cm.Config.InactiveThreshold) {
				a.dropConsumer(k)
			}
		}
	}
}
