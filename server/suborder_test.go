package server

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestDurablePushSubOKBeforeDeliveries is the regression test for the
// broker engineer's 2/10 failure of TestDurablePushCreditAndRelease: the
// SUB's +OK must be written before any delivery of that subscription, also
// when the +OK is held behind an earlier, waiting POLL.
func TestDurablePushSubOKBeforeDeliveries(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	for _, tp := range []string{"ord", "empty"} {
		w.send("TOPIC CREATE " + tp + "\r\n")
		w.expect(`^\+OK `)
	}
	for i := range 3 {
		w.send(fmt.Sprintf("PUB ord 1\r\n%d\r\n", i))
		w.expect(`^\+OK 0:\d+$`)
	}
	for round := range 10 {
		c := fibrilConn(t, s, "")
		group := fmt.Sprintf("g%d", round)
		if round%2 == 1 {
			// A waiting POLL ahead holds the SUB's +OK back.
			c.send("POLL empty e 1 200\r\n")
		}
		c.send("SUB ord " + group + " 7 3\r\n")
		if round%2 == 1 {
			c.expect(`^\+OK 0$`)
		}
		c.expect(`^\+OK$`)
		for i := range 3 {
			l := c.expect(`^MSG ord 7 \S+ 1$`)
			if !strings.HasPrefix(l, "MSG") {
				t.Fatalf("round %d: %q", round, l)
			}
			c.expectBody(fmt.Sprint(i))
		}
		c.nc.Close()
	}
}

// TestPublishTooLargeForSegmentIsMaxPayload: a PUB within max_payload that
// does not fit one record of the engine's log is answered max_payload (was
// "internal"), and the connection keeps working.
func TestPublishTooLargeForSegmentIsMaxPayload(t *testing.T) {
	s := startDurable(t, func(o *Options) { o.Engine.SegmentSize = 64 << 10 })
	w := fibrilConn(t, s, "")
	w.send("TOPIC CREATE big\r\n")
	w.expect(`^\+OK `)
	body := strings.Repeat("x", 100<<10)
	w.send(fmt.Sprintf("PUB big %d\r\n%s\r\n", len(body), body))
	w.expect(`^-ERR 'max_payload `)
	w.send("PUB big 1\r\nx\r\n")
	w.expect(`^\+OK 0:1$`)
}

// TestNATSAckOnWriteSurvivesFullRing: deliveries to a stock NATS consumer
// are acked when written even while publishers keep the partition's
// command ring full (a refused ack would leave them leased and redelivered
// after the lease).
func TestNATSAckOnWriteSurvivesFullRing(t *testing.T) {
	s := startDurable(t, func(o *Options) { o.Engine.QueueSize = 4 })
	w := fibrilConn(t, s, "")
	w.send("TOPIC CREATE flood\r\n")
	w.expect(`^\+OK `)
	w.send(`GROUP CREATE flood g {"lease_ms":600000}` + "\r\n")
	w.expect(`^\+OK `)
	n := dialInfo(t, s)
	n.send("CONNECT {}\r\nSUB flood g 1\r\nPING\r\n")
	n.expect(`^PONG$`)
	const total = 400
	// Confirmed publishes in bursts that overrun the small ring.
	p := fibrilConn(t, s, "")
	var burst strings.Builder
	for i := range total {
		fmt.Fprintf(&burst, "PUB flood 1\r\n%d\r\n", i%10)
	}
	p.send(burst.String())
	for range total {
		n.expect(`^MSG flood 1 \S+ 1$`)
		n.expect(`^\d$`)
	}
	for range total {
		p.expect(`^\+OK 0:\d+$`)
	}
	waitFor(t, 10*time.Second, "all acked", func() bool {
		tp, _ := s.durable.b.Topic("flood")
		g, _ := tp.FindGroup("g")
		in := g.Info()
		return in.Acked == total && in.Inflight == 0 && in.Pending == 0
	})
}
