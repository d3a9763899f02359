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
	c.mu.Lock()
	c.nextSID++
	s := &Subscription{conn: c, sid: c.nextSID, topic: subject, notify: make(chan struct{}, 1)}
	c.subs[s.sid] = s
	c.mu.Unlock()
	if _, err := c.roundTrip(ctx, reqOK, s.subFrame()); err != nil {
		c.mu.Lock()
		delete(c.subs, s.sid)
		c.mu.Unlock()
		return nil, fmt.Errorf("fibril: SUB %s: %w", subject, err)
	}
	return s, nil
}
