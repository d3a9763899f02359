package fibril_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

// TestSubscribeSubject: a plain subscription with a wildcard gets what is
// published to matching subjects (and nothing else), as Msgs without a
// handle, and nothing more once stopped.
func TestSubscribeSubject(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	base := fmt.Sprintf("_INBOX.sdk-plain.%d", time.Now().UnixNano()) // never a durable topic
	sub, err := c.SubscribeSubject(ctx, base+".*")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{base + ".a", base + ".b.deeper", base + ".c"} {
		pos, err := c.Publish(ctx, s, []byte(s), fibril.WithHeader("X-S", s))
		if err != nil || pos.Stored {
			t.Fatalf("publish %s: %+v %v", s, pos, err)
		}
	}
	for _, want := range []string{base + ".a", base + ".c"} {
		m, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != want || string(m.Data) != want || m.Header.Get("X-S") != want {
			t.Fatalf("got %q %q %v, want %s", m.Subject, m.Data, m.Header, want)
		}
		if m.Handle() != "" || m.DeliveryCount() != 0 {
			t.Fatalf("plain delivery with a handle: %q %d", m.Handle(), m.DeliveryCount())
		}
		if err := m.Ack(ctx); !errors.Is(err, fibril.ErrNoHandle) {
			t.Fatalf("Ack of a plain delivery: %v, want ErrNoHandle", err)
		}
	}
	if err := sub.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, base+".d", []byte("late")); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if m, err := sub.Next(short); !errors.Is(err, fibril.ErrClosed) {
		t.Fatalf("Next after Stop: %v %v, want ErrClosed", m, err)
	}
	if _, err := c.SubscribeSubject(ctx, "a b"); !errors.Is(err, fibril.ErrInvalidArgument) {
		t.Fatalf("subject with a space: %v, want ErrInvalidArgument", err)
	}
}
