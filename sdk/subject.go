package fibril

// Plain subscriptions: SPEC.md "NATS core", SUB <subject> <sid> with no
// queue group. They complete Publish to a subject no durable topic
// captures (Position.Stored false), for tools that watch traffic.

import (
	"context"
	"fmt"
)

// SubscribeSubject starts a plain NATS subscription to subject (wildcards
// "*" and ">" allowed; SUB <subject> <sid>) and waits for the server's +OK.
// Every message published to a matching subject is pushed to it, at most
// once and without a lease: its Msgs have no handle (Handle returns "",
// DeliveryCount 0, and Ack, Nack, Reject and the lease calls return
// ErrNoHandle). Read it with Next; Stop ends it. For a durable consumer
// group use Subscribe, Consume or Fetch instead.
func (c *Conn) SubscribeSubject(ctx context.Context, subject string) (*Subscription, error) {
	if err := checkSubject(subject); err != nil {
		return nil, err
	}
	s := &Subscription{conn: c, topic: subject}
	if err := c.register(ctx, s); err != nil {
		return nil, fmt.Errorf("fibril: SUB %s: %w", subject, err)
	}
	return s, nil
}
