package server

// Compatibility with the official NATS Go client against the real server on
// 127.0.0.1:0: connect, publish, subscribe, queue-subscribe, request/reply,
// headers, auto-unsubscribe, auth.

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func natsConnect(t *testing.T, s *Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append(opts, nats.Timeout(5*time.Second), nats.NoReconnect())
	nc, err := nats.Connect("nats://"+s.Addr().String(), opts...)
	if err != nil {
		t.Fatalf("nats.Connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func TestNATSClientPubSub(t *testing.T) {
	s := startServer(t, durableFiles)
	nc := natsConnect(t, s)
	if nc.ConnectedServerId() != s.ID() {
		t.Fatalf("server id %q, want %q", nc.ConnectedServerId(), s.ID())
	}
	sub, err := nc.SubscribeSync("greet.*")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := nc.Publish(fmt.Sprintf("greet.%d", i), []byte(fmt.Sprintf("hello %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("msg %d: %v", i, err)
		}
		if want := fmt.Sprintf("hello %d", i); string(m.Data) != want || m.Subject != fmt.Sprintf("greet.%d", i) {
			t.Fatalf("got %q on %q, want %q", m.Data, m.Subject, want)
		}
	}
	if _, err := sub.NextMsg(50 * time.Millisecond); err != nats.ErrTimeout {
		t.Fatalf("extra message or error: %v", err)
	}
}

func TestNATSClientQueueSubscribe(t *testing.T) {
	s := startServer(t, durableFiles)
	pub := natsConnect(t, s)
	var counts [3]atomic.Int64
	var total atomic.Int64
	for i := range counts {
		nc := natsConnect(t, s)
		if _, err := nc.QueueSubscribe("jobs", "workers", func(*nats.Msg) {
			counts[i].Add(1)
			total.Add(1)
		}); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	const n = 300
	for i := range n {
		if err := pub.Publish("jobs", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "all jobs delivered", func() bool { return total.Load() >= n })
	// No duplicates arrive later.
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := total.Load(); got != n {
		t.Fatalf("queue group received %d, want exactly %d", got, n)
	}
	for i := range counts {
		if counts[i].Load() == 0 {
			t.Errorf("member %d got nothing out of %d (random pick should spread)", i, n)
		}
	}
}

func TestNATSClientRequestReply(t *testing.T) {
	s := startServer(t, durableFiles)
	srv := natsConnect(t, s)
	if _, err := srv.Subscribe("echo", func(m *nats.Msg) { _ = m.Respond(append([]byte("re: "), m.Data...)) }); err != nil {
		t.Fatal(err)
	}
	if err := srv.Flush(); err != nil {
		t.Fatal(err)
	}
	cl := natsConnect(t, s)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := cl.Request("echo", []byte(fmt.Sprint(i)), 5*time.Second)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			if want := fmt.Sprintf("re: %d", i); string(m.Data) != want {
				t.Errorf("reply %q, want %q", m.Data, want)
			}
		}()
	}
	wg.Wait()
}

func TestNATSClientHeaders(t *testing.T) {
	s := startServer(t, durableFiles)
	nc := natsConnect(t, s)
	sub, err := nc.SubscribeSync("h")
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg("h")
	msg.Header.Set("Trace-Id", "abc123")
	msg.Header.Add("Multi", "1")
	msg.Header.Add("Multi", "2")
	msg.Data = []byte("with headers")
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != "with headers" || m.Header.Get("Trace-Id") != "abc123" || len(m.Header.Values("Multi")) != 2 {
		t.Fatalf("got data %q header %v", m.Data, m.Header)
	}
}

func TestNATSClientAutoUnsubscribe(t *testing.T) {
	s := startServer(t, durableFiles)
	nc := natsConnect(t, s)
	sub, err := nc.SubscribeSync("au")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.AutoUnsubscribe(3); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := nc.Publish("au", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := sub.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("msg %d: %v", i, err)
		}
	}
	if _, err := sub.NextMsg(50 * time.Millisecond); err == nil {
		t.Fatal("got a 4th message after AutoUnsubscribe(3)")
	}
}

func TestNATSClientNoEcho(t *testing.T) {
	s := startServer(t, durableFiles)
	nc := natsConnect(t, s, nats.NoEcho())
	other := natsConnect(t, s)
	sub, err := nc.SubscribeSync("e")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("e", []byte("own")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := other.Publish("e", []byte("other")); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil || string(m.Data) != "other" {
		t.Fatalf("got %v %v, want the other connection's message only", m, err)
	}
}

// durableFiles turns the durable engine on with real files, as `fibril
// serve` runs: stock clients then also exercise auto-created topics.
func durableFiles(o *Options) { o.NoBroker = false }
