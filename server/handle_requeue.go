package server

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
)

// Bounds of TOPIC REQUEUE (SPEC.md 10): the messages one request moves and
// how long it may take (each message is a durable publish and a durable
// settle).
const (
	requeueDefault = 1000
	requeueMax     = 100000
	requeueTimeout = 30 * time.Second
)

// requeue runs TOPIC REQUEUE for identity id: the identity must manage the
// dead-letter topic (as for TOPIC DELETE) and may move a message only to a
// subject it may publish to, or to a named topic ("to") all of whose
// subjects it may publish to; a refusal stops the requeue there and the
// message stays. A request that moved some messages and then stopped
// answers +OK with the count and the reason.
func requeue(b *broker.Broker, id *access.Identity, name string, js []byte) (any, error) {
	req := protocol.RequeueRequest{Max: requeueDefault}
	if err := protocol.DecodeStrict(js, &req); err != nil {
		return nil, err
	}
	if req.Max < 1 || req.Max > requeueMax {
		return nil, protocol.NewError(protocol.CodeInvalidConfig, "max out of range [1, 100000]")
	}
	if _, err := lookupTopic(b, name, id.ManageTopic, id.ManageTopic); err != nil {
		return nil, err
	}
	sel := broker.RequeueSelect{Max: req.Max, Filter: req.Filter, FromSeq: broker.Seq(req.FromSeq), ToSeq: broker.Seq(req.ToSeq),
		Allow: id.Publish}
	if req.To != "" {
		// A named target needs publish rights over all of it, as a
		// dead_letter target does; the original subjects then need none.
		mayPublish := func(t access.Topic) error {
			if !id.PublishTopic(t) {
				return protocol.NewError(protocol.CodePermissionDenied, "Publish to topic "+strconv.Quote(t.Name))
			}
			return nil
		}
		if _, err := lookupTopic(b, req.To, seeErr(id), mayPublish); err != nil {
			return nil, err
		}
		sel.To, sel.Allow = broker.TopicName(req.To), nil
	}
	if err := sel.Check(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), requeueTimeout)
	defer cancel()
	n, err := b.RequeueSelected(ctx, broker.TopicName(name), sel)
	var pe *protocol.Error
	switch {
	case err == nil:
		return protocol.Requeued{Topic: name, Requeued: n}, nil
	case n == 0 && errors.As(err, &pe) && pe.Code == protocol.CodePermissionDenied:
		return nil, err
	}
	return protocol.Requeued{Topic: name, Requeued: n, Error: err.Error()}, nil
}
