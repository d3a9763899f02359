package broker

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestDeadLetterWithReason: Delivery.DeadLetter stores the copy with the
// caller's reason and error text (one line) and settles the source; bad
// reasons and groups without a dead-letter topic are refused, the delivery
// left in flight.
func TestDeadLetterWithReason(t *testing.T) {
	e := newMemEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{})
	none := e.group(tp, "none", GroupConfig{DeadLetter: "-"})
	e.publish(tp, "payload")
	d := e.poll(g, 1)[0]
	for _, reason := range []string{"", "two\nlines"} {
		if err := d.DeadLetter(ctx, reason, "x"); !errors.Is(err, ErrInvalid) {
			t.Errorf("reason %q: got %v, want ErrInvalid", reason, err)
		}
	}
	if err := e.poll(none, 1)[0].DeadLetter(ctx, "mine", "x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("no dead-letter topic: got %v, want ErrInvalid", err)
	}
	if err := d.DeadLetter(ctx, "decode_error", "bad\r\nbytes"); err != nil {
		t.Fatal(err)
	}
	if in, err := g.InfoCurrent(ctx); err != nil || in.Pending != 0 {
		t.Fatalf("source pending %d (%v), want 0", in.Pending, err)
	}
	dt, ok := e.b.Topic(TopicName(DeadLetterTopic("q", "w")))
	if !ok {
		t.Fatal("no dead-letter topic")
	}
	dd := e.poll(e.group(dt, "r", GroupConfig{}), 1)[0]
	for k, want := range map[string]string{"Fibril-Reason": "decode_error", "Fibril-Error": "bad bytes",
		"Fibril-Subject": "q", "Fibril-Seq": "1", "Fibril-Deliveries": "1"} {
		if got := HeaderValue(dd.Header, k); got != want {
			t.Errorf("%s: %q, want %q (header %q)", k, got, want, dd.Header)
		}
	}
	if string(dd.Data) != "payload" {
		t.Errorf("data %q", dd.Data)
	}
}
