package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestUnconfirmedPublishesNotDroppedWhenLaneFull: a publisher that asks for
// no confirms (every stock NATS client) could flood a durable topic faster
// than the engine took it; once the connection's lane was over its bound the
// server silently dropped the publishes (37k of 100k in a benchmark). Now
// parsing waits for the lane to drain instead, and every message is stored.
func TestUnconfirmedPublishesNotDroppedWhenLaneFull(t *testing.T) {
	s := startDurable(t, func(o *Options) { o.Engine.QueueSize = 4; o.MaxUnconfirmed = 8 })
	m := fibrilConn(t, s, "")
	m.send("TOPIC CREATE flood\r\n")
	m.expect(`^\+OK `)

	const total = 3000
	p := dialInfo(t, s)
	var b strings.Builder
	b.WriteString("CONNECT {}\r\n")
	for i := range total {
		body := fmt.Sprint(i)
		fmt.Fprintf(&b, "PUB flood %d\r\n%s\r\n", len(body), body)
	}
	b.WriteString("PING\r\n")
	p.send(b.String())
	p.expect(`^PONG$`)

	deadline := time.Now().Add(10 * time.Second)
	for {
		m.send("TOPIC INFO flood\r\n")
		line := m.expect(`^\+OK `)
		var info struct {
			Msgs int64 `json:"msgs"`
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "+OK ")), &info); err != nil {
			t.Fatal(err)
		}
		if info.Msgs == total {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored %d of %d unconfirmed publishes", info.Msgs, total)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
