package jsapi

// SPEC.md 16.2: STREAM.CREATE/UPDATE/INFO/DELETE/PURGE/NAMES/LIST and
// STREAM.MSG.GET. A stream is a one-partition topic of the same name.

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"time"

	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/wire"
)

// defaultDuplicates is JetStream's default duplicate window;
// maxDuplicates the longest a topic takes (duplicate_window_ms).
const (
	defaultDuplicates = 2 * time.Minute
	maxDuplicates     = (1<<32 - 1) * time.Millisecond
)

// withDefaults fills in JetStream's defaults and refuses what the engine
// cannot serve.
func (c StreamConfig) withDefaults() (StreamConfig, *APIError) {
	if len(c.Subjects) == 0 {
		c.Subjects = []string{c.Name}
	}
	if c.Retention == "" {
		c.Retention = "limits"
	}
	if c.Discard == "" {
		c.Discard = "old"
	}
	if c.Storage == "" {
		c.Storage = "file"
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	for _, p := range []*int64{&c.MaxMsgs, &c.MaxBytes, &c.MaxMsgsPerSubject} {
		if *p == 0 {
			*p = -1
		}
	}
	if c.MaxConsumers == 0 {
		c.MaxConsumers = -1
	}
	if c.Duplicates == 0 {
		c.Duplicates = defaultDuplicates
	}
	if c.Compression == "" {
		c.Compression = "none"
	}
	switch {
	case c.Retention != "limits" && c.Retention != "workqueue" && c.Retention != "interest":
		return c, errStreamConfig("invalid retention %q", c.Retention)
	case c.Discard != "old" && c.Discard != "new":
		return c, errStreamConfig("invalid discard policy %q", c.Discard)
	case c.Storage == "memory":
		return c, errNotSupported(10052, "memory storage (every stream is stored on file and fsynced)")
	case c.Storage != "file":
		return c, errStreamConfig("invalid storage %q", c.Storage)
	case c.Replicas > 1:
		return c, errReplicas()
	case c.Replicas < 0:
		return c, apiErr(400, 10133, "replicas count cannot be negative")
	case c.MaxMsgsPerSubject > 0:
		return c, errNotSupported(10052, "max_msgs_per_subject")
	case c.Mirror != nil, c.Sources != nil:
		return c, errNotSupported(10052, "mirrors and sources")
	case c.SubjectTransform != nil, c.RePublish != nil:
		return c, errNotSupported(10052, "subject transforms and republish")
	case c.NoAck:
		return c, errNotSupported(10052, "no_ack (every stored publish is acknowledged)")
	case c.Sealed, c.AllowRollup, c.AllowMsgTTL, c.AllowMsgSchedule, c.AllowAtomic, c.MirrorDirect:
		return c, errNotSupported(10052, "sealed streams, rollups, per-message TTL, schedules and atomic batches")
	case c.FirstSeq > 1:
		return c, errNotSupported(10052, "first_seq")
	case c.Compression != "none" && c.Compression != "s2":
		return c, errStreamConfig("invalid compression %q", c.Compression)
	case c.MaxAge < 0 || c.Duplicates < 0:
		return c, errStreamConfig("negative max_age or duplicate_window")
	case c.Duplicates > maxDuplicates:
		return c, errStreamConfig("duplicate_window %s over %s", c.Duplicates, maxDuplicates)
	}
	c.AllowDirect = false // served through STREAM.MSG.GET
	return c, nil
}

// topicConfig is the engine configuration of a stream: one partition,
// confirmed after fsync (group commit).
func (c StreamConfig) topicConfig() broker.TopicConfig {
	tc := broker.TopicConfig{Subjects: c.Subjects, Partitions: 1, Durability: broker.DurabilityGroup}
	tc.Retention = broker.RetentionWorkqueue // workqueue and interest
	if c.Retention == "limits" {
		tc.Retention = broker.RetentionLimits
	}
	msgs, bytes := max(c.MaxMsgs, 0), max(c.MaxBytes, 0)
	if c.Discard == "new" {
		tc.MaxUnsettledMsgs, tc.MaxUnsettledBytes, tc.FullPolicy = msgs, bytes, broker.FullReject
	} else {
		tc.MaxMsgs, tc.MaxBytes = msgs, bytes
	}
	if c.MaxAge > 0 {
		tc.MaxAgeMs = max(int64(c.MaxAge/time.Millisecond), 1)
	}
	if c.Compression == "s2" {
		tc.Compression = broker.CompressionS2
	}
	// Nats-Msg-Id de-duplication is the topic's: JetStream's window (ns)
	// in whole milliseconds, at least one.
	dup := max(int64((c.Duplicates+time.Millisecond-1)/time.Millisecond), 1)
	tc.DuplicateWindowMs = &dup
	return tc
}

// sameTopic reports whether the topic configuration a stream request wants
// is the topic's, have. A topic made before duplicate_window_ms existed
// has the default window whatever its stream recorded (recorded): a
// request asking the recorded window still matches it.
func sameTopic(want, have broker.TopicConfig, recorded, asked StreamConfig) bool {
	if reflect.DeepEqual(want, have) {
		return true
	}
	if recorded.Duplicates != asked.Duplicates || have.DuplicateWindowMs == nil || *have.DuplicateWindowMs != wire.DefaultDuplicateWindowMs {
		return false
	}
	want.DuplicateWindowMs = have.DuplicateWindowMs
	return reflect.DeepEqual(want, have)
}

// derivedConfig describes a topic created without this API.
func derivedConfig(t *broker.Topic) StreamConfig {
	tc := t.Config()
	c := StreamConfig{Name: string(t.Name()), Subjects: tc.Subjects, Retention: string(tc.Retention),
		MaxMsgs: tc.MaxMsgs, MaxBytes: tc.MaxBytes, MaxAge: time.Duration(tc.MaxAgeMs) * time.Millisecond,
		Storage: "file", Compression: string(tc.Compression)}
	if w := tc.DuplicateWindowMs; w != nil && *w > 0 {
		c.Duplicates = time.Duration(*w) * time.Millisecond // 0 (off) has no JetStream form: the default shows
	}
	if tc.FullPolicy == broker.FullReject {
		c.Discard, c.MaxMsgs, c.MaxBytes = "new", tc.MaxUnsettledMsgs, tc.MaxUnsettledBytes
	}
	if tc.Compression == broker.CompressionZstd {
		c.Compression = "s2" // nearest JetStream value
	}
	c, _ = c.withDefaults()
	return c
}

func (a *API) streamConfigOf(t *broker.Topic) (StreamConfig, time.Time) {
	if sm, ok := a.meta.stream(string(t.Name())); ok {
		return sm.Config, sm.Created
	}
	return derivedConfig(t), time.Time{}
}

func (a *API) streamCreate(id *access.Identity, name string, body []byte, update bool) (any, *APIError) {
	var cfg StreamConfig
	if e := decode(body, &cfg); e != nil {
		return nil, e
	}
	if cfg.Name == "" {
		cfg.Name = name
	}
	if cfg.Name != name {
		return nil, errStreamMismatch()
	}
	if !streamName(name) {
		return nil, errStreamConfig("invalid stream name %q (letters, digits, '-' and '_')", name)
	}
	cfg, e := cfg.withDefaults()
	if e != nil {
		return nil, e
	}
	tc := cfg.topicConfig()
	want, err := tc.Resolve(broker.TopicName(name))
	if err != nil {
		return nil, errStreamConfig("%v", err)
	}
	if update {
		t, e := a.lookup(id, name, id.ManageTopic)
		if e != nil {
			return nil, e
		}
		if err := id.CreateTopic(access.Topic{Name: name, Subjects: cfg.Subjects}); err != nil {
			return nil, errDenied(err.Error())
		}
		if oc, _ := a.streamConfigOf(t); !sameTopic(want, t.Config(), oc, cfg) {
			return nil, errNotSupported(10052, "changing the subjects, retention, limits, discard policy or duplicate window of an existing stream")
		}
		_, created := a.streamConfigOf(t)
		if created.IsZero() {
			created = nowUTC()
		}
		if err := a.meta.putStream(name, streamMeta{Config: cfg, Created: created}); err != nil {
			return nil, errInternal(err)
		}
		return a.streamInfoOf(t, "io.nats.jetstream.api.v1.stream_update_response"), nil
	}
	if err := id.CreateTopic(access.Topic{Name: name, Subjects: cfg.Subjects}); err != nil {
		return nil, errDenied(err.Error())
	}
	t, err := a.eng.CreateTopic(broker.TopicName(name), tc)
	switch {
	case errors.Is(err, broker.ErrTopicExists):
		old, ok := a.eng.Topic(broker.TopicName(name))
		if !ok {
			return nil, errStreamCreate(err)
		}
		if oc, _ := a.streamConfigOf(old); !reflect.DeepEqual(oc, cfg) || !sameTopic(want, old.Config(), oc, cfg) {
			return nil, errStreamNameExist()
		}
		return a.streamInfoOf(old, "io.nats.jetstream.api.v1.stream_create_response"), nil
	case errors.Is(err, broker.ErrOverlap):
		return nil, errSubjectOverlap()
	case err != nil:
		return nil, errStreamCreate(err)
	}
	if err := a.meta.putStream(name, streamMeta{Config: cfg, Created: nowUTC()}); err != nil {
		return nil, errInternal(err)
	}
	return a.streamInfoOf(t, "io.nats.jetstream.api.v1.stream_create_response"), nil
}

type streamInfoResponse struct {
	response
	StreamInfo
}

func (a *API) streamInfoOf(t *broker.Topic, typ string) streamInfoResponse {
	cfg, created := a.streamConfigOf(t)
	in := t.Info()
	st := StreamState{Msgs: uint64(in.Messages), Bytes: uint64(in.Bytes), Consumers: len(t.Groups())}
	if len(in.Partitions) > 0 {
		st.FirstSeq, st.LastSeq = uint64(in.Partitions[0].FirstSeq), uint64(in.Partitions[0].LastSeq)
	}
	return streamInfoResponse{response{Type: typ}, StreamInfo{Config: cfg, Created: created, State: st, TS: nowUTC()}}
}

func (a *API) streamInfo(id *access.Identity, name string) (any, *APIError) {
	t, e := a.lookup(id, name, see(id))
	if e != nil {
		return nil, e
	}
	return a.streamInfoOf(t, "io.nats.jetstream.api.v1.stream_info_response"), nil
}

type successResponse struct {
	response
	Success bool   `json:"success"`
	Purged  uint64 `json:"purged,omitempty"`
}

func (a *API) streamDelete(id *access.Identity, name string) (any, *APIError) {
	t, e := a.lookup(id, name, id.ManageTopic)
	if e != nil {
		return nil, e
	}
	if err := a.eng.DeleteTopic(t.Name()); err != nil {
		if errors.Is(err, broker.ErrNoTopic) {
			return nil, errStreamNotFound()
		}
		return nil, errInternal(err)
	}
	a.forgetStream(name)
	if err := a.meta.dropStream(name); err != nil {
		a.log.Error("jetstream stream settings not removed", "stream", name, "err", err)
	}
	return successResponse{response: response{Type: "io.nats.jetstream.api.v1.stream_delete_response"}, Success: true}, nil
}

func (a *API) streamPurge(id *access.Identity, name string, body []byte) (any, *APIError) {
	var req purgeRequest
	if e := decode(body, &req); e != nil {
		return nil, e
	}
	if req.Subject != "" || req.Seq != 0 || req.Keep != 0 {
		return nil, errNotSupported(10003, "purge by filter, sequence or keep")
	}
	t, e := a.lookup(id, name, id.ManageTopic)
	if e != nil {
		return nil, e
	}
	before := t.Info().Messages
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := t.Purge(ctx); err != nil {
		return nil, errInternal(err)
	}
	return successResponse{response: response{Type: "io.nats.jetstream.api.v1.stream_purge_response"}, Success: true, Purged: uint64(max(before, 0))}, nil
}

// streams lists the topics id may see that serve as streams and, when
// subject is set, capture some subject of it.
func (a *API) streams(id *access.Identity, subject string) []*broker.Topic {
	var out []*broker.Topic
	for _, t := range a.eng.Topics() {
		if !streamName(string(t.Name())) || !id.SeeTopic(accessTopic(t)) {
			continue
		}
		if subject != "" && !slices.ContainsFunc(t.Subjects(), func(f string) bool { return access.Overlap(f, subject) }) {
			continue
		}
		out = append(out, t)
	}
	return out
}

func (a *API) streamList(id *access.Identity, infos bool, body []byte) (any, *APIError) {
	var req pagedRequest
	if e := decode(body, &req); e != nil {
		return nil, e
	}
	all := a.streams(id, req.Subject)
	type paged struct {
		response
		Total  int `json:"total"`
		Offset int `json:"offset"`
		Limit  int `json:"limit"`
	}
	p := paged{Total: len(all), Offset: req.Offset, Limit: pageSize}
	if infos {
		p.Type = "io.nats.jetstream.api.v1.stream_list_response"
		list := []StreamInfo{}
		for _, t := range page(all, req.Offset) {
			list = append(list, a.streamInfoOf(t, "").StreamInfo)
		}
		return struct {
			paged
			Streams []StreamInfo `json:"streams"`
			Missing []string     `json:"missing,omitempty"`
		}{paged: p, Streams: list}, nil
	}
	p.Type = "io.nats.jetstream.api.v1.stream_names_response"
	names := []string{}
	for _, t := range page(all, req.Offset) {
		names = append(names, string(t.Name()))
	}
	return struct {
		paged
		Streams []string `json:"streams"`
	}{paged: p, Streams: names}, nil
}

// maxLastBySubjectScan bounds the messages a last_by_subj get reads.
const maxLastBySubjectScan = 1 << 20

func (a *API) msgGet(r Requester, name string, body []byte) (any, *APIError) {
	id := r.Identity()
	var req msgGetRequest
	if e := decode(body, &req); e != nil {
		return nil, e
	}
	if req.NextFor != "" || req.UpToSeq != 0 || req.UpToTime != nil || req.StartTime != nil ||
		req.Batch != 0 || req.MultiLast != nil || req.AsOfTime != nil {
		return nil, errNotSupported(10003, "message get other than by sequence or last by subject")
	}
	if (req.Seq == 0) == (req.LastFor == "") {
		return nil, errBadRequest("give seq or last_by_subj")
	}
	t, e := a.lookup(id, name, id.ConsumeTopic) // reads data: consume rights
	if e != nil {
		return nil, e
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	var found *broker.StoredMessage
	if req.Seq != 0 {
		ms, _, err := t.Browse(ctx, 0, broker.Seq(req.Seq), 1)
		if err != nil {
			return nil, errInternal(err)
		}
		if len(ms) == 1 && uint64(ms[0].Seq) == req.Seq {
			found = &ms[0]
		}
	} else {
		from, scanned := broker.Seq(0), 0
		for scanned < maxLastBySubjectScan {
			ms, next, err := t.Browse(ctx, 0, from, 256)
			if err != nil {
				return nil, errInternal(err)
			}
			if len(ms) == 0 {
				break
			}
			for i := range ms {
				if access.Matches(req.LastFor, ms[i].Subject) {
					found = &ms[i]
				}
			}
			scanned += len(ms)
			from = next
		}
		if scanned >= maxLastBySubjectScan {
			return nil, errNotSupported(10003, "last_by_subj over a stream of more than 1048576 messages")
		}
	}
	if found == nil {
		return nil, errNoMessage()
	}
	return struct {
		response
		Message storedMsg `json:"message"`
	}{response{Type: "io.nats.jetstream.api.v1.stream_msg_get_response"},
		storedMsg{Subject: found.Subject, Seq: uint64(found.Seq), Header: found.Header, Data: found.Data, Time: found.Time.UTC()}}, nil
}
