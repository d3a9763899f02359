package broker

import (
	"context"
	"fmt"
	"strings"
)

// maxErrorDetail bounds the Fibril-Error line of a dead letter.
const maxErrorDetail = 1024

// DeadLetter copies the delivery to its group's dead-letter topic with the
// header lines a dead letter gets (Fibril-Reason: reason, the original
// subject, partition, sequence and delivery count) plus Fibril-Error:
// detail when detail is not empty (made one line, at most 1 KiB), waits
// until the copy is durable, then acks the delivery. It is how an embedding
// application dead-letters a message for a reason of its own (a payload it
// cannot decode) instead of the engine's "rejected" or "max_deliveries".
//
// It blocks on both writes, bounded by ctx. A crash or an error between the
// copy and the ack leaves the copy stored and the delivery in flight: it is
// delivered again (at least once, as the engine's own dead letters are).
// It fails with ErrInvalid for a delivery not from a broker, a reason with
// a line break, or a group without a dead-letter topic ("-"); the delivery
// is then left as it was.
func (d Delivery) DeadLetter(ctx context.Context, reason, detail string) error {
	if d.b == nil {
		return fmt.Errorf("%w: delivery not from a broker", ErrInvalid)
	}
	if reason == "" || strings.ContainsAny(reason, "\r\n") {
		return fmt.Errorf("%w: dead-letter reason %q", ErrInvalid, reason)
	}
	t, ok := d.b.TopicByID(d.Handle.Topic)
	if !ok {
		return fmt.Errorf("dead-letter %s: %w", d.Handle, ErrUnknownHandle)
	}
	var g *Group
	for _, x := range t.Groups() {
		if x.ID() == d.Handle.Group {
			g = x
		}
	}
	if g == nil {
		return fmt.Errorf("dead-letter %s: %w", d.Handle, ErrUnknownHandle)
	}
	dest := g.cfg.DeadLetter
	if dest == "-" {
		return fmt.Errorf("%w: group %s/%s has no dead-letter topic", ErrInvalid, t.name, g.name)
	}
	dt, ok := d.b.Topic(TopicName(dest))
	if !ok {
		return fmt.Errorf("dead-letter %s: topic %s: %w", d.Handle, dest, ErrNoTopic)
	}
	detail = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(detail)
	if len(detail) > maxErrorDetail {
		detail = detail[:maxErrorDetail]
	}
	hdr := dlqHeader(d.Header, reason, detail, d.Subject, d.Handle.Partition, d.Handle.Seq, d.Attempt)
	if _, err := dt.Publish(ctx, Message{Subject: dest, Header: hdr, Data: d.Data}); err != nil {
		return fmt.Errorf("dead-letter %s: %w", d.Handle, err)
	}
	if err := d.Ack(ctx); err != nil {
		return fmt.Errorf("dead-letter %s: the copy is stored, the ack failed: %w", d.Handle, err)
	}
	return nil
}

// HeaderValue returns the value of the first line named key (case
// insensitive) of a NATS/1.0 header block such as Delivery.Header, or ""
// when there is none. It reads a dead letter's Fibril-Reason and
// Fibril-Error.
func HeaderValue(hdr []byte, key string) string { return headerValue(hdr, key) }
