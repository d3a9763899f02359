package server

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestFastPublisherSlowSubscriberNotCut: a nats.go loop publishing 1 KiB
// messages faster than a plain subscriber reads them is slowed to the
// subscriber's pace (as nats-server stalls it); neither is cut, and the
// subscriber gets every message. The subscriber used to be cut as a slow
// consumer (then `nats bench sub` waited forever after reconnecting).
func TestFastPublisherSlowSubscriberNotCut(t *testing.T) {
	const n = 8000
	s := startServer(t, func(o *Options) { o.MaxPending = 1 << 20 })
	sub := dialInfo(t, s)
	sub.send("CONNECT {}\r\nSUB fast 1\r\nPING\r\n")
	sub.expect(`^PONG$`)
	var cut atomic.Value
	nc := natsConnect(t, s, nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { cut.Store(fmt.Sprint(err)) }))
	payload := bytes.Repeat([]byte("x"), 1024)
	frame := fmt.Sprintf("MSG fast 1 %d\r\n%s\r\n", len(payload), payload)
	got := make(chan error, 1)
	go func() {
		// About 8 MB/s: far slower than the publisher.
		want := int64(n * len(frame))
		var read int64
		buf := make([]byte, 16<<10)
		_ = sub.nc.SetReadDeadline(time.Now().Add(2 * time.Minute))
		for read < want {
			k, err := sub.r.Read(buf[:min(int64(len(buf)), want-read)])
			if k > 0 && read == 0 && !strings.HasPrefix(string(buf[:k]), "MSG ") {
				got <- fmt.Errorf("subscriber got %q", buf[:min(k, 80)])
				return
			}
			read += int64(k)
			if err != nil {
				got <- fmt.Errorf("after %d of %d bytes: %w", read, want, err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		got <- nil
	}()
	for i := range n {
		if err := nc.Publish("fast", payload); err != nil {
			t.Fatalf("publish %d: %v (%v)", i, err, cut.Load())
		}
	}
	if err := nc.FlushTimeout(2 * time.Minute); err != nil {
		t.Fatalf("flush: %v (%v)", err, cut.Load())
	}
	if err := <-got; err != nil {
		t.Fatalf("slow subscriber: %v", err)
	}
	if c := cut.Load(); c != nil {
		t.Fatalf("publisher cut: %v", c)
	}
	// Nothing else is pending for the subscriber.
	sub.send("PING\r\n")
	sub.expect(`^PONG$`)
}
