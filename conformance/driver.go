package conformance

import (
	"context"
	"encoding/json"
	"time"
)

// Driver is one way of speaking to the server for the high-level ops
// (README.md, "Ops"): the raw wire, or an SDK.
type Driver interface {
	// Name is the runner's column in the result table ("wire", "go-sdk").
	Name() string
	// Open connects one session (a fibril-mode connection).
	Open(ctx context.Context, addr string, o SessionOptions) (Session, error)
}

// SessionOptions configures a session.
type SessionOptions struct {
	CRC bool // CRC-32 tokens on PUB/MSG (default on in scenarios)
	// Servers is every node of a cluster, in order (the address Open gets
	// is the first); the client fails over among them (SPEC.md 11.1).
	Servers []string
}

// FailoverDriver is a Driver whose sessions reconnect by themselves to
// another server of SessionOptions.Servers when theirs is lost. Cluster
// scenarios are not applicable to (skipped by) drivers that are not one.
type FailoverDriver interface {
	Driver
	Failover() bool
}

// Position is where a publish was stored. Duplicate: a message with its id
// was stored there within the topic's duplicate window (SPEC.md 7.5).
type Position struct {
	Stored    bool
	Partition int
	Seq       uint64
	Duplicate bool
}

// OutMsg is a message to publish.
type OutMsg struct {
	Subject string
	Data    []byte
	Header  map[string]string
	Key     string
	MsgID   string
}

// Delivery is a message received from a durable group.
type Delivery struct {
	Subject       string
	Data          []byte
	Header        map[string][]string
	Handle        string
	DeliveryCount int
	Partition     int
	Seq           uint64
	Native        any // the driver's own message value, for settling
}

// Session is one client connection driven by a Driver. Sessions are used
// by one goroutine at a time.
type Session interface {
	Publish(ctx context.Context, m OutMsg) (Position, error)
	// PublishMany pipelines msgs; it returns one result per message.
	PublishMany(ctx context.Context, msgs []OutMsg) ([]Position, []error)
	Poll(ctx context.Context, topic, group string, max int, wait time.Duration) ([]*Delivery, error)
	// Settle applies op (ack, nack, reject, extend) to d; ms is the nack
	// delay or lease extension (0: none given).
	Settle(ctx context.Context, d *Delivery, op string, ms int) error
	// SettleHandle is Settle for a handle given as text.
	SettleHandle(ctx context.Context, handle, op string, ms int) error
	Subscribe(ctx context.Context, topic, group string, maxInflight int) (Subscription, error)
	// Admin runs a management verb (words like "TOPIC", "CREATE", name) with
	// an optional JSON argument and returns the JSON answer.
	Admin(ctx context.Context, words []string, arg json.RawMessage) (json.RawMessage, error)
	// Restarted is called after the server restarted (same address). An SDK
	// reconnects by itself and does nothing here; the wire driver redials.
	Restarted(ctx context.Context) error
	Close() error
}

// Subscription is a push consumer.
type Subscription interface {
	// Next returns the next delivery, or an error when ctx ends first.
	Next(ctx context.Context) (*Delivery, error)
	Stop(ctx context.Context) error
}
