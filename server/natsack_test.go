package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/broker"
	"github.com/nats-io/nats.go"
)

// TestNATSAckExplicitWithStockClient (SPEC.md 10.2): with nats_ack
// "explicit" a stock nats.go queue subscriber's messages stay leased until
// it publishes +ACK to the handle; one it never acks comes back to another
// consumer once its connection closes. An "auto" group settles on write.
func TestNATSAckExplicitWithStockClient(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	w.send("TOPIC CREATE work\r\n")
	w.expect(`^\+OK `)
	w.send(`GROUP CREATE work exp {"nats_ack":"explicit"}` + "\r\n")
	w.expect(`^\+OK \{.*"nats_ack":"explicit"`)
	w.send("GROUP CREATE work auto\r\n")
	w.expect(`^\+OK \{.*"nats_ack":"auto"`)
	for i := range 2 {
		w.send(fmt.Sprintf("PUB work 1\r\n%d\r\n", i))
		w.expect(`^\+OK 0:\d+$`)
	}
	groupCounts := func(group string) (inflight, acked uint64) {
		tp, _ := s.durable.b.Topic("work")
		g, _ := tp.FindGroup(bgroup(group))
		in := g.Info()
		return uint64(in.Inflight), in.Acked
	}

	nc := natsConnect(t, s)
	sub, err := nc.QueueSubscribeSync("work", "exp")
	if err != nil {
		t.Fatal(err)
	}
	var ms []*nats.Msg
	for range 2 {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(m.Reply, "$F.") || !strings.HasSuffix(m.Reply, ".1") {
			t.Fatalf("reply %q is not a first-attempt ack handle", m.Reply)
		}
		ms = append(ms, m)
	}
	if in, acked := groupCounts("exp"); in != 2 || acked != 0 {
		t.Fatalf("explicit group before +ACK: inflight %d acked %d", in, acked)
	}
	if err := ms[0].Respond([]byte("+ACK")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "+ACK settles", func() bool { in, acked := groupCounts("exp"); return in == 1 && acked == 1 })

	// The unacked one is released when the stock client goes away.
	nc.Close()
	w.send("POLL work exp 1 2000\r\n")
	w.expectDelivery(`^MSG work 0 \S+\.2 1$`, string(ms[1].Data))
	w.expect(`^\+OK 1$`)

	// auto: settled as written, no +ACK needed.
	nc2 := natsConnect(t, s)
	sub2, err := nc2.QueueSubscribeSync("work", "auto")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := sub2.NextMsg(5 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "auto settles on write", func() bool { in, acked := groupCounts("auto"); return in == 0 && acked == 2 })
}

// bgroup converts a group name for the engine.
func bgroup(s string) broker.GroupName { return broker.GroupName(s) }
