package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/fibrilmq/fibril/wire"
)

// This file holds the JSON objects of INFO, CONNECT and the management verbs
// (SPEC.md, "INFO", "CONNECT", "Management"). They are not on the hot path.

// Info is the JSON of INFO, the server's first frame (and later updates).
type Info struct {
	ServerID   string `json:"server_id"`
	ServerName string `json:"server_name"`
	// Version is the NATS server version whose protocol and JetStream
	// API subset the server speaks (stock clients gate features on it);
	// FibrilVersion is Fibril's own.
	Version       string   `json:"version"`
	FibrilVersion string   `json:"fibril_version,omitempty"`
	Proto         int      `json:"proto"`
	Go            string   `json:"go,omitempty"`
	Host          string   `json:"host"`
	Port          int      `json:"port"`
	Headers       bool     `json:"headers"`
	MaxPayload    int64    `json:"max_payload"`
	ClientID      uint64   `json:"client_id,omitempty"`
	ClientIP      string   `json:"client_ip,omitempty"`
	AuthRequired  bool     `json:"auth_required,omitempty"`
	TLSRequired   bool     `json:"tls_required,omitempty"`
	TLSAvailable  bool     `json:"tls_available,omitempty"`
	Nonce         string   `json:"nonce,omitempty"`
	ConnectURLs   []string `json:"connect_urls,omitempty"`

	// Fibril is the extension level the server speaks (1).
	Fibril int `json:"fibril"`
	// MaxUnconfirmed is the most publishes a connection may have sent and
	// not yet seen confirmed; the server refuses more (max_unconfirmed).
	MaxUnconfirmed int `json:"max_unconfirmed"`
	// HeartbeatMillis is how often the server PINGs an idle connection.
	HeartbeatMillis int64 `json:"heartbeat_ms"`
	// MaxInflight is the default max-inflight of a durable SUB.
	MaxInflight int `json:"max_inflight"`
	// CRC says the server accepts "crc":true in CONNECT.
	CRC bool `json:"crc"`
	// MaxControlLine is the longest control line the server accepts.
	MaxControlLine int `json:"max_control_line,omitempty"`
}

// Connect is the JSON of CONNECT.
type Connect struct {
	Verbose      bool   `json:"verbose"`
	Pedantic     bool   `json:"pedantic"`
	TLSRequired  bool   `json:"tls_required"`
	AuthToken    string `json:"auth_token,omitempty"`
	User         string `json:"user,omitempty"`
	Pass         string `json:"pass,omitempty"`
	Name         string `json:"name,omitempty"`
	Lang         string `json:"lang,omitempty"`
	Version      string `json:"version,omitempty"`
	Protocol     int    `json:"protocol,omitempty"`
	Echo         *bool  `json:"echo,omitempty"`
	Headers      bool   `json:"headers,omitempty"`
	NoResponders bool   `json:"no_responders,omitempty"`
	JWT          string `json:"jwt,omitempty"`
	NKey         string `json:"nkey,omitempty"`
	Sig          string `json:"sig,omitempty"`

	// Fibril 1 asks for the extensions and strict answers (SPEC.md,
	// "Connection modes"); it implies Confirm.
	Fibril int `json:"fibril,omitempty"`
	// CRC turns CRC mode on for this connection (both directions).
	CRC bool `json:"crc,omitempty"`
	// Confirm asks for a +OK/-ERR answer to every PUB/HPUB.
	Confirm bool `json:"confirm,omitempty"`
	// Forward is the token a cluster node presents when it forwards
	// commands to another (SPEC.md 11.2): the one the target announced
	// in the cluster's metadata group. As names the user the forwarded
	// commands run as ("" for a token or no-auth client).
	Forward string `json:"fibril_forward,omitempty"`
	As      string `json:"fibril_as,omitempty"`
	// Plain (with Forward) marks a connection that carries another
	// node's publishes to this node's plain subscribers only: nothing it
	// sends is stored or forwarded again.
	Plain bool `json:"fibril_plain,omitempty"`
}

// EchoOn reports whether the client wants its own publishes delivered to its
// own subscriptions (NATS's default: true).
func (c *Connect) EchoOn() bool { return c.Echo == nil || *c.Echo }

// Confirms reports whether publishes are answered (confirm, or fibril 1).
func (c *Connect) Confirms() bool { return c.Confirm || c.Fibril >= 1 }

// ParseConnect decodes and checks the JSON of CONNECT. Unknown fields are
// ignored (NATS clients send more). It returns an *Error with
// CodeInvalidConnect when the JSON does not decode or fibril is not 0 or 1.
func ParseConnect(js []byte) (Connect, error) {
	var c Connect
	if err := json.Unmarshal(js, &c); err != nil {
		return Connect{}, &Error{Code: CodeInvalidConnect, Err: err}
	}
	if c.Fibril != 0 && c.Fibril != 1 {
		return Connect{}, &Error{Code: CodeInvalidConnect, Detail: fmt.Sprintf("fibril %d not supported", c.Fibril)}
	}
	if c.Protocol < 0 || c.Protocol > 1 {
		return Connect{}, &Error{Code: CodeInvalidConnect, Detail: fmt.Sprintf("protocol %d not supported", c.Protocol)}
	}
	return c, nil
}

// ParseInfo decodes the JSON of INFO. Unknown fields are ignored.
func ParseInfo(js []byte) (Info, error) {
	var i Info
	if err := json.Unmarshal(js, &i); err != nil {
		return Info{}, fmt.Errorf("protocol: INFO: %w", err)
	}
	return i, nil
}

// AppendInfo appends "INFO <json>".
func AppendInfo(dst []byte, info *Info) ([]byte, error) { return appendJSONLine(dst, "INFO ", info) }

// AppendConnect appends "CONNECT <json>".
func AppendConnect(dst []byte, c *Connect) ([]byte, error) {
	return appendJSONLine(dst, "CONNECT ", c)
}

// AppendOKJSON appends "+OK <json>" with v encoded on one line (the answer
// to a management verb).
func AppendOKJSON(dst []byte, v any) ([]byte, error) { return appendJSONLine(dst, "+OK ", v) }

func appendJSONLine(dst []byte, prefix string, v any) ([]byte, error) {
	js, err := json.Marshal(v) // never emits a raw line end
	if err != nil {
		return dst, fmt.Errorf("protocol: encode %s: %w", prefix, err)
	}
	dst = append(dst, prefix...)
	dst = append(dst, js...)
	return append(dst, crlf...), nil
}

// Position is where a published message was stored. Duplicate: the
// publish's message id was stored there within the topic's duplicate
// window, and it was not stored again (SPEC.md 7.5).
type Position struct {
	Partition uint32 `json:"partition"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// confirmDuplicate marks a confirm of a duplicate publish.
const confirmDuplicate = "duplicate"

// ParseConfirm interprets the text of an +OK that answers a PUB/HPUB:
// "<partition>:<seq>" (stored: true), the same followed by " duplicate"
// (stored: true, pos.Duplicate) or "-" (not stored). It does not allocate
// on success.
func ParseConfirm(text []byte) (pos Position, stored bool, err error) {
	t := trimSpace(text)
	if len(t) == 1 && t[0] == '-' {
		return Position{}, false, nil
	}
	dup := false
	if j := bytes.IndexByte(t, ' '); j > 0 {
		if string(trimSpace(t[j:])) != confirmDuplicate {
			return Position{}, false, &Error{Code: CodeInvalidArgs, Detail: "publish confirm " + quoteDetail(text)}
		}
		t, dup = t[:j], true
	}
	i := bytes.IndexByte(t, ':')
	if i > 0 {
		p, st1 := parseUint(t[:i], maxUint32)
		s, st2 := parseUint(t[i+1:], maxUint64)
		if st1 == numOK && st2 == numOK {
			return Position{Partition: uint32(p), Seq: s, Duplicate: dup}, true, nil
		}
	}
	return Position{}, false, &Error{Code: CodeInvalidArgs, Detail: "publish confirm " + quoteDetail(text)}
}

// ParsePollDone interprets the text of the +OK that ends a POLL answer.
func ParsePollDone(text []byte) (int, error) {
	n, st := parseUint(trimSpace(text), MaxCount)
	if st != numOK {
		return 0, &Error{Code: CodeInvalidArgs, Detail: "POLL count " + quoteDetail(text)}
	}
	return int(n), nil
}

// TopicConfig is the optional JSON of TOPIC CREATE and the "config" of
// TOPIC INFO. Zero fields take the defaults SPEC.md gives. It is the one
// schema wire.TopicConfig, shared with the engine (broker.TopicConfig is
// the same struct), so the server decodes it once and converts for free.
type TopicConfig = wire.TopicConfig

// GroupConfig is the optional JSON of GROUP CREATE and the "config" of
// GROUP INFO: the one schema wire.GroupConfig, shared with the engine
// (broker.GroupConfig is the same struct), so the server decodes it once
// and converts for free.
type GroupConfig = wire.GroupConfig

// DecodeStrict decodes one management JSON argument into v (a *TopicConfig
// or *GroupConfig), refusing unknown fields and trailing data. Empty js
// leaves v unchanged. It returns an *Error with CodeInvalidJSON, or with
// CodeInvalidConfig for a numeric field of a *TopicConfig or *GroupConfig out
// of its range (SPEC.md 10.1, 10.2).
func DecodeStrict(js []byte, v any) error {
	if len(trimSpace(js)) == 0 {
		return nil
	}
	var ranges map[string]fieldRange
	switch v.(type) {
	case *TopicConfig:
		ranges = topicRanges
	case *GroupConfig:
		ranges = groupRanges
	}
	if ranges != nil {
		if err := checkRanges(js, ranges); err != nil {
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &Error{Code: CodeInvalidJSON, Err: err}
	}
	if dec.More() {
		return &Error{Code: CodeInvalidJSON, Detail: "trailing data after the JSON object"}
	}
	return nil
}

// PartitionInfo describes one partition of a topic.
type PartitionInfo struct {
	Partition uint32 `json:"partition"`
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	Msgs      uint64 `json:"msgs"`
	Bytes     uint64 `json:"bytes"`
	// Replicas names the nodes holding the partition, in a cluster where
	// the topic's replicas are fewer than the nodes (SPEC.md 10.1);
	// absent when every node holds it.
	Replicas []string `json:"replicas,omitempty"`
}

// TopicInfo answers TOPIC CREATE and TOPIC INFO: the configuration with
// every default filled in, and the state.
type TopicInfo struct {
	Name       string          `json:"name"`
	ID         uint64          `json:"id"`
	Config     TopicConfig     `json:"config"`
	Msgs       uint64          `json:"msgs"`
	Bytes      uint64          `json:"bytes"`
	Partitions []PartitionInfo `json:"partitions"`
	Groups     []string        `json:"groups"`
}

// GroupPartitionInfo describes one group's progress in one partition.
type GroupPartitionInfo struct {
	Partition uint32 `json:"partition"`
	// AckFloor: every seq <= AckFloor is settled.
	AckFloor uint64 `json:"ack_floor"`
	// Delivered is the highest seq delivered at least once.
	Delivered uint64 `json:"delivered"`
	// DamagedSeq is the damaged offset the group stopped at in this
	// partition (0: none; SPEC.md section 10), DamagedError what was found.
	DamagedSeq   uint64 `json:"damaged_seq,omitempty"`
	DamagedError string `json:"damaged_error,omitempty"`
	// Replicas is PartitionInfo.Replicas.
	Replicas []string `json:"replicas,omitempty"`
}

// GroupInfo answers GROUP CREATE and GROUP INFO.
type GroupInfo struct {
	Topic        string               `json:"topic"`
	Name         string               `json:"name"`
	ID           uint64               `json:"id"`
	Config       GroupConfig          `json:"config"`
	Pending      uint64               `json:"pending"`       // ready, never delivered or due again
	Inflight     uint64               `json:"inflight"`      // delivered, lease running
	Redelivered  uint64               `json:"redelivered"`   // deliveries with attempt > 1 so far
	DeadLettered uint64               `json:"dead_lettered"` // moved to the dead-letter topic so far
	Partitions   []GroupPartitionInfo `json:"partitions"`
}

// TopicList answers TOPIC LIST.
type TopicList struct {
	Topics []string `json:"topics"`
}

// GroupList answers GROUP LIST.
type GroupList struct {
	Topic  string   `json:"topic"`
	Groups []string `json:"groups"`
}

// RequeueRequest is the JSON of TOPIC REQUEUE (SPEC.md 10): which dead
// letters go back to the topics that capture their original subjects.
type RequeueRequest struct {
	Max     int      `json:"max,omitempty"`      // default 1000, at most 100000
	Filter  []string `json:"filter,omitempty"`   // on the original subject (Fibril-Subject); none: all
	FromSeq uint64   `json:"from_seq,omitempty"` // offsets from, in every partition (0: the first)
	ToSeq   uint64   `json:"to_seq,omitempty"`   // offsets up to (0: the last)
	To      string   `json:"to,omitempty"`       // a topic to publish them to (default: the one capturing each original subject)
}

// Requeued answers TOPIC REQUEUE: how many moved and, when it stopped at
// a message it could not move (that one stays), why.
type Requeued struct {
	Topic    string `json:"topic"`
	Requeued int    `json:"requeued"`
	Error    string `json:"error,omitempty"`
}

// Deleted answers TOPIC DELETE and GROUP DELETE.
type Deleted struct {
	Topic string `json:"topic"`
	Group string `json:"group,omitempty"`
}
