package server

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/memstore"
	"github.com/fibrilmq/fibril/server/seglog"
	"github.com/nats-io/nats.go"
)

// slowStore is a partition log whose appends take a while, as on a slow
// disk.
type slowStore struct {
	seglog.Store
	delay time.Duration
}

func (s slowStore) Append(es []seglog.Entry) (seglog.Seq, error) {
	time.Sleep(s.delay)
	return s.Store.Append(es)
}

// TestFastPublisherSlowedNotCut: a plain nats.go loop publishing 1 KiB
// messages to a captured subject faster than the topic's disk takes them
// is slowed down by TCP (the server stops reading it) and never
// disconnected; every message is stored. It used to be cut with
// "Maximum Payload Violation" (input buffer over MaxInputBuffer) after
// 100k-300k messages. FIBRIL_LONG=1 publishes 500k.
func TestFastPublisherSlowedNotCut(t *testing.T) {
	n := 20_000
	if testing.Short() {
		n = 10_000
	}
	if longTests() {
		n = 500_000
	}
	ms := memstore.New()
	s := startServer(t, func(o *Options) {
		o.NoBroker = false
		o.Engine.OpenStore = func(dir string, p seglog.Policy) (seglog.Store, error) {
			st, err := ms.Open(dir, p)
			if err != nil {
				return nil, err
			}
			return slowStore{Store: st, delay: time.Millisecond}, nil
		}
		o.Engine.QueueSize = 64
		o.Engine.MaxBatch = 16
		o.MaxInputBuffer = 2 << 20 // smaller than what the loop sends
	})
	w := fibrilConn(t, s, "")
	w.send(`TOPIC CREATE flood {"durability":"none"}` + "\r\n")
	w.expect(`^\+OK \{`)

	var disconnected atomic.Value
	nc := natsConnect(t, s, nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
		disconnected.Store(fmt.Sprint(err))
	}), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		disconnected.Store(fmt.Sprint(err))
	}))
	payload := []byte(strings.Repeat("x", 1024))
	for i := range n {
		if err := nc.Publish("flood", payload); err != nil {
			t.Fatalf("publish %d: %v (disconnect: %v)", i, err, disconnected.Load())
		}
	}
	if err := nc.FlushTimeout(2 * time.Minute); err != nil {
		t.Fatalf("flush: %v (disconnect: %v)", err, disconnected.Load())
	}
	if d := disconnected.Load(); d != nil || !nc.IsConnected() {
		t.Fatalf("publisher cut: %v", d)
	}
	if s.stats.moved.Load() == 0 {
		t.Fatalf("the publisher was never held back: the test did not load the server")
	}
	waitFor(t, time.Minute, "every message stored", func() bool {
		w.send("TOPIC INFO flood\r\n")
		return strings.Contains(w.expect(`^\+OK \{`), fmt.Sprintf(`"msgs":%d,`, n))
	})
	// The moved connection still answers and still receives.
	sub, err := nc.SubscribeSync("after.move")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("after.move", []byte("ok")); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(5 * time.Second); err != nil || string(m.Data) != "ok" {
		t.Fatalf("after the move: %v %v", m, err)
	}
}

// longTests reports whether the long forms of tests run (FIBRIL_LONG=1,
// `make test-nats-long`).
func longTests() bool { return os.Getenv("FIBRIL_LONG") == "1" }

// BenchmarkPublisherTransport compares a connection served by its gnet
// event loop with one moved to goroutines (conn_moved.go): one publisher
// and one subscriber, 16 B and 1 KiB plain messages, both connections on
// the same transport. The moved path must not be the slow one.
func BenchmarkPublisherTransport(b *testing.B) {
	for _, moved := range []bool{false, true} {
		for _, size := range []int{16, 1024} {
			name := fmt.Sprintf("gnet/%d", size)
			if moved {
				name = fmt.Sprintf("moved/%d", size)
			}
			b.Run(name, func(b *testing.B) {
				s := startServer(b, nil)
				s.moved.all.Store(moved)
				benchPlainFanOutOn(b, s, size)
				if moved && s.stats.moved.Load() < 2 {
					b.Fatalf("%d connections moved, want 2", s.stats.moved.Load())
				}
			})
		}
	}
}
