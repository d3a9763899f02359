package jsapi

// The JSON shapes of the JetStream API subset served (field names as
// JetStream's; durations are nanoseconds, times RFC 3339).

import "time"

// APIError is JetStream's error object: the HTTP-like code, JetStream's
// own error code (err_code) and a description.
type APIError struct {
	Code        int    `json:"code"`
	ErrCode     uint16 `json:"err_code,omitempty"`
	Description string `json:"description,omitempty"`
}

// Error makes APIError an error.
func (e *APIError) Error() string { return e.Description }

// response is embedded in every answer.
type response struct {
	Type  string    `json:"type"`
	Error *APIError `json:"error,omitempty"`
}

// StreamConfig is the part of JetStream's stream configuration served.
// Its fields mirror the JetStream API's JSON one for one (stock clients
// send and read them), so it has as many as that schema needs.
type StreamConfig struct {
	Name              string            `json:"name"`
	Description       string            `json:"description,omitempty"`
	Subjects          []string          `json:"subjects,omitempty"`
	Retention         string            `json:"retention"`
	MaxConsumers      int               `json:"max_consumers"`
	MaxMsgs           int64             `json:"max_msgs"`
	MaxBytes          int64             `json:"max_bytes"`
	MaxAge            time.Duration     `json:"max_age"`
	MaxMsgsPerSubject int64             `json:"max_msgs_per_subject"`
	MaxMsgSize        int32             `json:"max_msg_size,omitempty"`
	Discard           string            `json:"discard"`
	Storage           string            `json:"storage"`
	Replicas          int               `json:"num_replicas"`
	NoAck             bool              `json:"no_ack,omitempty"`
	Duplicates        time.Duration     `json:"duplicate_window,omitempty"`
	Sealed            bool              `json:"sealed,omitempty"`
	DenyDelete        bool              `json:"deny_delete,omitempty"`
	DenyPurge         bool              `json:"deny_purge,omitempty"`
	AllowRollup       bool              `json:"allow_rollup_hdrs,omitempty"`
	AllowDirect       bool              `json:"allow_direct"`
	MirrorDirect      bool              `json:"mirror_direct,omitempty"`
	Compression       string            `json:"compression,omitempty"`
	FirstSeq          uint64            `json:"first_seq,omitempty"`
	Metadata          map[string]string `json:"metadata,omitempty"`

	// Settings the engine does not serve: any value refuses the stream.
	Mirror           any  `json:"mirror,omitempty"`
	Sources          any  `json:"sources,omitempty"`
	SubjectTransform any  `json:"subject_transform,omitempty"`
	RePublish        any  `json:"republish,omitempty"`
	AllowMsgTTL      bool `json:"allow_msg_ttl,omitempty"`
	AllowMsgSchedule bool `json:"allow_msg_schedules,omitempty"`
	AllowAtomic      bool `json:"allow_atomic,omitempty"`
}

// StreamState is a stream's state in StreamInfo.
type StreamState struct {
	Msgs      uint64    `json:"messages"`
	Bytes     uint64    `json:"bytes"`
	FirstSeq  uint64    `json:"first_seq"`
	FirstTime time.Time `json:"first_ts"`
	LastSeq   uint64    `json:"last_seq"`
	LastTime  time.Time `json:"last_ts"`
	Consumers int       `json:"consumer_count"`
}

// StreamInfo answers STREAM.CREATE/UPDATE/INFO.
type StreamInfo struct {
	Config  StreamConfig `json:"config"`
	Created time.Time    `json:"created"`
	State   StreamState  `json:"state"`
	TS      time.Time    `json:"ts"`
}

// ConsumerConfig is the part of JetStream's consumer configuration served.
// Its fields mirror the JetStream API's JSON one for one (stock clients
// send and read them), so it has as many as that schema needs.
type ConsumerConfig struct {
	Durable           string            `json:"durable_name,omitempty"`
	Name              string            `json:"name,omitempty"`
	Description       string            `json:"description,omitempty"`
	DeliverPolicy     string            `json:"deliver_policy"`
	OptStartSeq       uint64            `json:"opt_start_seq,omitempty"`
	OptStartTime      *time.Time        `json:"opt_start_time,omitempty"`
	AckPolicy         string            `json:"ack_policy"`
	AckWait           time.Duration     `json:"ack_wait,omitempty"`
	MaxDeliver        int               `json:"max_deliver,omitempty"`
	BackOff           []time.Duration   `json:"backoff,omitempty"`
	FilterSubject     string            `json:"filter_subject,omitempty"`
	FilterSubjects    []string          `json:"filter_subjects,omitempty"`
	ReplayPolicy      string            `json:"replay_policy"`
	SampleFrequency   string            `json:"sample_freq,omitempty"`
	MaxWaiting        int               `json:"max_waiting,omitempty"`
	MaxAckPending     int               `json:"max_ack_pending,omitempty"`
	HeadersOnly       bool              `json:"headers_only,omitempty"`
	MaxRequestBatch   int               `json:"max_batch,omitempty"`
	MaxRequestExpires time.Duration     `json:"max_expires,omitempty"`
	MaxRequestBytes   int               `json:"max_bytes,omitempty"`
	InactiveThreshold time.Duration     `json:"inactive_threshold,omitempty"`
	Replicas          int               `json:"num_replicas"`
	MemoryStorage     bool              `json:"mem_storage,omitempty"`
	Metadata          map[string]string `json:"metadata,omitempty"`

	// Push consumers and other settings not served: any value refuses.
	DeliverSubject string        `json:"deliver_subject,omitempty"`
	DeliverGroup   string        `json:"deliver_group,omitempty"`
	FlowControl    bool          `json:"flow_control,omitempty"`
	Heartbeat      time.Duration `json:"idle_heartbeat,omitempty"`
	RateLimit      uint64        `json:"rate_limit_bps,omitempty"`
	PriorityGroups []string      `json:"priority_groups,omitempty"`
	PriorityPolicy string        `json:"priority_policy,omitempty"`
	PauseUntil     *time.Time    `json:"pause_until,omitempty"`
}

// createConsumerRequest is the body of CONSUMER.CREATE and DURABLE.CREATE.
type createConsumerRequest struct {
	Stream string         `json:"stream_name"`
	Config ConsumerConfig `json:"config"`
	Action string         `json:"action,omitempty"`
}

// SequenceInfo is a consumer's position.
type SequenceInfo struct {
	Consumer uint64     `json:"consumer_seq"`
	Stream   uint64     `json:"stream_seq"`
	Last     *time.Time `json:"last_active,omitempty"`
}

// ConsumerInfo answers CONSUMER.CREATE/INFO.
type ConsumerInfo struct {
	Stream         string         `json:"stream_name"`
	Name           string         `json:"name"`
	Created        time.Time      `json:"created"`
	Config         ConsumerConfig `json:"config"`
	Delivered      SequenceInfo   `json:"delivered"`
	AckFloor       SequenceInfo   `json:"ack_floor"`
	NumAckPending  int            `json:"num_ack_pending"`
	NumRedelivered int            `json:"num_redelivered"`
	NumWaiting     int            `json:"num_waiting"`
	NumPending     uint64         `json:"num_pending"`
	TS             time.Time      `json:"ts"`
}

// nextRequest is the body of CONSUMER.MSG.NEXT.
type nextRequest struct {
	Batch     int           `json:"batch"`
	Expires   time.Duration `json:"expires,omitempty"`
	NoWait    bool          `json:"no_wait,omitempty"`
	MaxBytes  int           `json:"max_bytes,omitempty"`
	Heartbeat time.Duration `json:"idle_heartbeat,omitempty"`
	// Priority groups (pinned, overflow) are not served.
	Group string `json:"group,omitempty"`
}

// pagedRequest is the body of the NAMES and LIST requests.
type pagedRequest struct {
	Offset  int    `json:"offset"`
	Subject string `json:"subject,omitempty"`
}

// msgGetRequest is the body of STREAM.MSG.GET.
type msgGetRequest struct {
	Seq       uint64 `json:"seq,omitempty"`
	LastFor   string `json:"last_by_subj,omitempty"`
	NextFor   string `json:"next_by_subj,omitempty"`
	UpToSeq   uint64 `json:"up_to_seq,omitempty"`
	UpToTime  any    `json:"up_to_time,omitempty"`
	StartTime any    `json:"start_time,omitempty"`
	Batch     int    `json:"batch,omitempty"`
	MultiLast any    `json:"multi_last,omitempty"`
	NoHeaders bool   `json:"no_hdr,omitempty"`
	MaxBytes  int    `json:"max_bytes,omitempty"`
	AsOfTime  any    `json:"as_of_time,omitempty"`
}

// storedMsg is STREAM.MSG.GET's message.
type storedMsg struct {
	Subject string    `json:"subject"`
	Seq     uint64    `json:"seq"`
	Header  []byte    `json:"hdrs,omitempty"`
	Data    []byte    `json:"data,omitempty"`
	Time    time.Time `json:"time"`
}

// purgeRequest is the body of STREAM.PURGE.
type purgeRequest struct {
	Subject string `json:"filter,omitempty"`
	Seq     uint64 `json:"seq,omitempty"`
	Keep    uint64 `json:"keep,omitempty"`
}

// accountLimits are the limits $JS.API.INFO reports (-1: none).
type accountLimits struct {
	MaxMemory     int64 `json:"max_memory"`
	MaxStore      int64 `json:"max_storage"`
	MaxStreams    int   `json:"max_streams"`
	MaxConsumers  int   `json:"max_consumers"`
	MaxAckPending int   `json:"max_ack_pending"`
	MemMaxStream  int64 `json:"memory_max_stream_bytes"`
	StoreMaxStrm  int64 `json:"storage_max_stream_bytes"`
	MaxBytesReq   bool  `json:"max_bytes_required"`
}

type apiStats struct {
	Total  uint64 `json:"total"`
	Errors uint64 `json:"errors"`
}
