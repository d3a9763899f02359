package fibril_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

// freezingProxy relays TCP to addr; freeze() makes every connection open at
// that moment go silent in both directions without closing it (a dead peer
// behind a NAT, a pulled cable). New connections relay normally.
func freezingProxy(t *testing.T, addr string) (proxyAddr string, freeze func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var frozen []*atomic.Bool
	go func() {
		for {
			cc, err := ln.Accept()
			if err != nil {
				return
			}
			sc, err := net.Dial("tcp", addr)
			if err != nil {
				cc.Close()
				continue
			}
			t.Cleanup(func() { cc.Close(); sc.Close() })
			f := new(atomic.Bool)
			mu.Lock()
			frozen = append(frozen, f)
			mu.Unlock()
			relay := func(dst, src net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if n > 0 && !f.Load() {
						if _, err := dst.Write(buf[:n]); err != nil {
							return
						}
					}
					if err == io.EOF || err != nil {
						return
					}
				}
			}
			go relay(sc, cc)
			go relay(cc, sc)
		}
	}()
	return ln.Addr().String(), func() {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range frozen {
			f.Store(true)
		}
	}
}

// TestHeartbeatDetectsDeadPeer: when the server goes silent without closing
// the connection, unanswered PINGs declare it dead, the client reconnects,
// and a publish made meanwhile is confirmed on the new connection.
func TestHeartbeatDetectsDeadPeer(t *testing.T) {
	ctx := testCtx(t)
	addr, freeze := freezingProxy(t, serverURL[len("fibril://"):])
	c := connect(t, "fibril://"+addr, fibril.WithHeartbeat(50*time.Millisecond, 2), fastReconnect)
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	freeze()
	start := time.Now()
	p, err := c.Publish(ctx, topic, []byte("through the outage"))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Stored || c.Reconnects() < 1 {
		t.Fatalf("position %v after %d reconnects", p, c.Reconnects())
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("dead peer noticed after %v, want about 3 heartbeats", el)
	}
	if m := fetchOne(t, c, topic, "g", time.Second); string(m.Data) != "through the outage" {
		t.Fatalf("got %q", m.Data)
	}
}

// TestHeartbeatWithFetcher: a Fetcher keeps POLLs pending all the time; once
// their wait has passed they must not excuse a silent server, so Next fails
// with ErrConnectionLost instead of hanging, and the Fetcher works again
// after the reconnect.
func TestHeartbeatWithFetcher(t *testing.T) {
	ctx := testCtx(t)
	addr, freeze := freezingProxy(t, serverURL[len("fibril://"):])
	c := connect(t, "fibril://"+addr, fibril.WithHeartbeat(50*time.Millisecond, 2), fastReconnect)
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	f, err := c.NewFetcher(topic, "g", 10, 100*time.Millisecond, fibril.WithPrefetch(2))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for { // a slow machine may miss a 50 ms heartbeat: a reconnect is fine here
		msgs, err := f.Next(ctx)
		if errors.Is(err, fibril.ErrConnectionLost) {
			continue
		}
		if err != nil || len(msgs) != 0 {
			t.Fatalf("Next on an empty topic: %d messages, err %v", len(msgs), err)
		}
		break
	}
	freeze()
	start := time.Now()
	for {
		_, err := f.Next(ctx)
		if errors.Is(err, fibril.ErrConnectionLost) {
			break
		}
		if err != nil {
			t.Fatalf("Next on a frozen connection: %v, want ErrConnectionLost", err)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("Next kept answering on a frozen connection")
		}
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("dead peer noticed after %v", el)
	}
	if _, err := c.Publish(ctx, topic, []byte("after")); err != nil {
		t.Fatal(err)
	}
	for {
		msgs, err := f.Next(ctx)
		if errors.Is(err, fibril.ErrConnectionLost) {
			continue // POLLs sent before the reconnect
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 1 && string(msgs[0].Data) == "after" {
			break
		}
		if len(msgs) != 0 {
			t.Fatalf("after the reconnect: %d messages", len(msgs))
		}
	}
}
