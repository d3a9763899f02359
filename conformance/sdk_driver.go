package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	fibril "github.com/fibrilmq/fibril/sdk"
)

// SDKDriver runs the high-level ops through the Go SDK (package fibril).
type SDKDriver struct{}

// Name implements Driver.
func (SDKDriver) Name() string { return "go-sdk" }

// Failover implements FailoverDriver: the SDK fails over by itself.
func (SDKDriver) Failover() bool { return true }

// Open implements Driver.
func (SDKDriver) Open(ctx context.Context, addr string, o SessionOptions) (Session, error) {
	var more []string
	for _, a := range o.Servers {
		if a != addr {
			more = append(more, "fibril://"+a)
		}
	}
	c, err := fibril.Connect(ctx, "fibril://"+addr,
		fibril.WithServers(more...),
		fibril.WithCRC(o.CRC),
		fibril.WithName("conformance"),
		fibril.WithReconnect(fibril.ReconnectPolicy{
			InitialDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond,
			Multiplier: 2, Jitter: 0.1, BufferBytes: 8 << 20,
		}))
	if err != nil {
		return nil, err
	}
	return &sdkSession{c: c}, nil
}

type sdkSession struct{ c *fibril.Conn }

func pubOpts(m OutMsg) []fibril.PubOption {
	var o []fibril.PubOption
	for k, v := range m.Header {
		o = append(o, fibril.WithHeader(k, v))
	}
	if m.Key != "" {
		o = append(o, fibril.WithKey(m.Key))
	}
	if m.MsgID != "" {
		o = append(o, fibril.WithMsgID(m.MsgID))
	}
	return o
}

func fromPos(p fibril.Position) Position {
	return Position{Stored: p.Stored, Partition: p.Partition, Seq: p.Seq, Duplicate: p.Duplicate}
}

// Publish implements Session.
func (s *sdkSession) Publish(ctx context.Context, m OutMsg) (Position, error) {
	p, err := s.c.Publish(ctx, m.Subject, m.Data, pubOpts(m)...)
	return fromPos(p), err
}

// PublishMany implements Session with PublishAsync futures.
func (s *sdkSession) PublishMany(ctx context.Context, msgs []OutMsg) ([]Position, []error) {
	pos := make([]Position, len(msgs))
	errs := make([]error, len(msgs))
	futs := make([]*fibril.PubFuture, len(msgs))
	for i, m := range msgs {
		futs[i], errs[i] = s.c.PublishAsync(ctx, m.Subject, m.Data, pubOpts(m)...)
	}
	for i, f := range futs {
		if f == nil {
			continue
		}
		p, err := f.Wait(ctx)
		pos[i], errs[i] = fromPos(p), err
	}
	return pos, errs
}

func toDelivery(m *fibril.Msg) *Delivery {
	return &Delivery{
		Subject: m.Subject, Data: m.Data, Header: m.Header, Handle: m.Handle(),
		DeliveryCount: m.DeliveryCount(), Partition: m.Partition(), Seq: m.Seq(), Native: m,
	}
}

// Poll implements Session.
func (s *sdkSession) Poll(ctx context.Context, topic, group string, max int, wait time.Duration) ([]*Delivery, error) {
	msgs, err := s.c.Fetch(ctx, topic, group, max, wait)
	out := make([]*Delivery, len(msgs))
	for i, m := range msgs {
		out[i] = toDelivery(m)
	}
	return out, err
}

// Settle implements Session.
func (s *sdkSession) Settle(ctx context.Context, d *Delivery, op string, ms int) error {
	m, ok := d.Native.(*fibril.Msg)
	if !ok {
		return s.SettleHandle(ctx, d.Handle, op, ms)
	}
	switch op {
	case "ack":
		return m.Ack(ctx)
	case "nack":
		return m.Nack(ctx, time.Duration(ms)*time.Millisecond)
	case "reject":
		return m.Reject(ctx)
	case "extend":
		if ms > 0 {
			return m.ExtendLease(ctx, time.Duration(ms)*time.Millisecond)
		}
		return m.InProgress(ctx)
	}
	return fmt.Errorf("unknown settle op %q", op)
}

// SettleHandle implements Session.
func (s *sdkSession) SettleHandle(ctx context.Context, handle, op string, ms int) error {
	return s.c.SettleHandle(ctx, handle, fibril.SettleOp(op), time.Duration(ms)*time.Millisecond)
}

// Subscribe implements Session with Messages (the iterator form), pulled
// one step at a time.
func (s *sdkSession) Subscribe(ctx context.Context, topic, group string, maxInflight int) (Subscription, error) {
	sub, err := s.c.Subscribe(ctx, topic, group, fibril.WithMaxInFlight(maxInflight))
	if err != nil {
		return nil, err
	}
	return &sdkSub{sub: sub}, nil
}

type sdkSub struct{ sub *fibril.Subscription }

// Next implements Subscription.
func (w *sdkSub) Next(ctx context.Context) (*Delivery, error) {
	m, err := w.sub.Next(ctx)
	if err != nil {
		return nil, err
	}
	return toDelivery(m), nil
}

// Stop implements Subscription.
func (w *sdkSub) Stop(ctx context.Context) error { return w.sub.Stop(ctx) }

// Admin implements Session through the SDK's management calls; the typed
// answers are turned back into JSON for the expectations.
func (s *sdkSession) Admin(ctx context.Context, words []string, arg json.RawMessage) (json.RawMessage, error) {
	var v any
	var err error
	switch words[0] + " " + words[1] {
	case "TOPIC CREATE":
		var cfg fibril.TopicConfig
		if err := unmarshalStrict(arg, &cfg); err != nil {
			return nil, err
		}
		v, err = s.c.CreateTopic(ctx, words[2], cfg)
	case "TOPIC INFO":
		v, err = s.c.Topic(ctx, words[2])
	case "TOPIC LIST":
		var names []string
		names, err = s.c.Topics(ctx)
		v = map[string]any{"topics": names}
	case "TOPIC DELETE":
		err = s.c.DeleteTopic(ctx, words[2])
		v = map[string]any{"topic": words[2]}
	case "TOPIC REQUEUE":
		var opts fibril.RequeueOptions
		if err := unmarshalStrict(arg, &opts); err != nil {
			return nil, err
		}
		v, err = s.c.Requeue(ctx, words[2], opts)
	case "GROUP CREATE":
		var cfg fibril.GroupConfig
		if err := unmarshalStrict(arg, &cfg); err != nil {
			return nil, err
		}
		v, err = s.c.CreateGroup(ctx, words[2], words[3], cfg)
	case "GROUP INFO":
		v, err = s.c.Group(ctx, words[2], words[3])
	case "GROUP LIST":
		var names []string
		names, err = s.c.Groups(ctx, words[2])
		v = map[string]any{"topic": words[2], "groups": names}
	case "GROUP DELETE":
		err = s.c.DeleteGroup(ctx, words[2], words[3])
		v = map[string]any{"topic": words[2], "group": words[3]}
	default:
		return nil, fmt.Errorf("sdk driver: no SDK call for %v", words)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// unmarshalStrict decodes a scenario's config the way the server would, so
// a field the SDK's config type lacks fails loudly instead of vanishing.
func unmarshalStrict(b json.RawMessage, v any) error {
	return protocol.DecodeStrict(b, v)
}

// Restarted implements Session: the SDK reconnects and replays by itself.
func (s *sdkSession) Restarted(context.Context) error { return nil }

// Close implements Session.
func (s *sdkSession) Close() error { return s.c.Close() }
