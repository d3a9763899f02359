package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/broker"
)

// Regression tests for the outbound bounds (outbound.go). A stalled
// consumer is a raw connection with a tiny receive buffer that stops
// reading; the server's socket buffers fill first, then its own.

// outboundOptions: a small MaxPending and WriteDeadline so that a stall
// shows in a few MiB.
func outboundOptions(o *Options) {
	o.MaxPending = 256 << 10
	o.WriteDeadline = time.Second
	o.MaxPollBytes = 64 << 10
}

// stallMsgs messages of stallSize bytes are more than the kernel's socket
// buffers on loopback (a few MiB) plus MaxPending.
const (
	stallMsgs = 2048
	stallSize = 8 << 10
)

// dialStalled dials s with a 4 KiB receive buffer, reads INFO and sends
// lines; the caller then stops reading.
func dialStalled(t *testing.T, s *Server, lines string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return errors.Join(err, serr)
	}}
	nc, err := d.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	r := bufio.NewReader(nc)
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if l, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(l, "INFO ") {
		t.Fatalf("INFO: %q %v", l, err)
	}
	if _, err := io.WriteString(nc, lines); err != nil {
		t.Fatal(err)
	}
	return nc
}

// fillTopic stores n messages of size bytes (payload starts with its
// 8-digit index) in topic through the engine.
func fillTopic(t *testing.T, s *Server, topic string, n, size int) {
	t.Helper()
	tp, ok := s.durable.b.Topic(broker.TopicName(topic))
	if !ok {
		t.Fatalf("no topic %s", topic)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pad := strings.Repeat("x", size-8)
	for i := range n {
		if _, err := tp.Publish(ctx, broker.Message{Subject: topic, Data: []byte(fmt.Sprintf("%08d", i) + pad)}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
}

// readDeliveries reads nc to EOF (the server closed it) and returns the
// indexes of the MSG payloads in it.
func readDeliveries(t *testing.T, nc net.Conn) map[int]bool {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	all, err := io.ReadAll(nc)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reading the cut connection: %v", err)
	}
	got := make(map[int]bool)
	p := protocol.NewParser(protocol.ServerToClient, protocol.Limits{MaxPayload: 1 << 20})
	_, _ = p.Parse(all, protocol.HandlerFunc(func(c *protocol.Command) error {
		if c.Op == protocol.OpMsg && len(c.Payload) >= 8 {
			if i, err := strconv.Atoi(string(c.Payload[:8])); err == nil {
				got[i] = true
			}
		}
		return nil
	}))
	return got
}

// pollAll consumes topic/group with POLL and ACK until every index below n
// is in have or received, or nothing came for a while; it returns the
// indexes received.
func pollAll(t *testing.T, s *Server, topic, group string, n int, have map[int]bool) map[int]bool {
	t.Helper()
	w := fibrilConn(t, s, "")
	got := make(map[int]bool)
	deadline := time.Now().Add(20 * time.Second)
	for empty := 0; empty < 4 && len(missing(n, have, got)) > 0 && time.Now().Before(deadline); {
		w.send("POLL " + topic + " " + group + " 64 500\r\n")
		var hs []string
		for {
			l := w.expect(`^(MSG |\+OK \d+$)`)
			if strings.HasPrefix(l, "+OK") {
				break
			}
			f := strings.Fields(l)
			size, _ := strconv.Atoi(f[len(f)-1])
			body := make([]byte, size+2)
			_ = w.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(w.r, body); err != nil {
				t.Fatal(err)
			}
			i, _ := strconv.Atoi(string(body[:8]))
			got[i] = true
			hs = append(hs, f[3])
		}
		if len(hs) == 0 {
			empty++
			continue
		}
		empty = 0
		w.send("ACK " + strings.Join(hs, " ") + "\r\n")
		w.expect(`^\+OK$`)
	}
	return got
}

// missing lists the indexes below n in neither set.
func missing(n int, sets ...map[int]bool) []int {
	var out []int
	for i := range n {
		found := false
		for _, s := range sets {
			found = found || s[i]
		}
		if !found {
			out = append(out, i)
		}
	}
	return out
}

func setupStallTopic(t *testing.T, s *Server, group string) {
	t.Helper()
	w := fibrilConn(t, s, "")
	w.send(`TOPIC CREATE big {"durability":"none"}` + "\r\n")
	w.expect(`^\+OK \{`)
	w.send("GROUP CREATE big " + group + "\r\n")
	w.expect(`^\+OK \{`)
}

// TestStalledDurablePushSubIsCut: `SUB <topic> <group> 1 2147483647` from a
// client that stops reading used to queue the whole topic in the server
// (2.3 GB in 20 s) and never be cut. Now its output stops at MaxPending,
// it is cut as a slow consumer, and its leased messages go to others.
func TestStalledDurablePushSubIsCut(t *testing.T) {
	s := startDurable(t, outboundOptions)
	setupStallTopic(t, s, "g")
	nc := dialStalled(t, s, "CONNECT {\"fibril\":1}\r\nSUB big g 1 2147483647\r\n")
	fillTopic(t, s, "big", stallMsgs, stallSize)
	waitFor(t, 20*time.Second, "slow consumer cut", func() bool { return s.stats.slowConsumers.Load() >= 1 })
	readDeliveries(t, nc) // Fibril deliveries stay leased until acked: all come back
	got := pollAll(t, s, "big", "g", stallMsgs, nil)
	if m := missing(stallMsgs, got); len(m) > 0 {
		t.Fatalf("%d messages not delivered again after the cut (first %d)", len(m), m[0])
	}
}

// TestNATSAckAutoSettlesOnlyWhatReachedTheSocket: with nats_ack auto a
// NATS-mode queue subscriber's deliveries were acked as soon as they were
// queued for the connection, so one that stopped reading had ~614,000
// messages counted settled while ~4,200 reached its socket. Now a delivery
// is settled once it is on the socket; the stalled connection is cut at
// the write deadline and the rest goes to another consumer: no message is
// lost.
func TestNATSAckAutoSettlesOnlyWhatReachedTheSocket(t *testing.T) {
	s := startDurable(t, outboundOptions)
	setupStallTopic(t, s, "auto")
	nc := dialStalled(t, s, "CONNECT {\"verbose\":false}\r\nSUB big auto 1\r\n")
	fillTopic(t, s, "big", stallMsgs, stallSize)
	waitFor(t, 20*time.Second, "slow consumer cut", func() bool { return s.stats.slowConsumers.Load() >= 1 })
	onSocket := readDeliveries(t, nc)
	if len(onSocket) == 0 || len(onSocket) == stallMsgs {
		t.Fatalf("the stalled consumer received %d of %d messages: the test did not stall it", len(onSocket), stallMsgs)
	}
	others := pollAll(t, s, "big", "auto", stallMsgs, onSocket)
	if m := missing(stallMsgs, onSocket, others); len(m) > 0 {
		t.Fatalf("%d messages settled without reaching any socket (first %d; stalled consumer got %d, others %d)",
			len(m), m[0], len(onSocket), len(others))
	}
}

// TestStalledPollPipelineIsCut: POLLs pipelined by a client that does not
// read used to have every answer queued without bound. Now the answers
// stop at MaxPending, the connection is cut, and its leases come back.
func TestStalledPollPipelineIsCut(t *testing.T) {
	s := startDurable(t, outboundOptions)
	setupStallTopic(t, s, "p")
	fillTopic(t, s, "big", stallMsgs, stallSize)
	nc := dialStalled(t, s, "CONNECT {\"fibril\":1}\r\n"+strings.Repeat("POLL big p 64\r\n", 300))
	waitFor(t, 20*time.Second, "slow consumer cut", func() bool { return s.stats.slowConsumers.Load() >= 1 })
	readDeliveries(t, nc)
	got := pollAll(t, s, "big", "p", stallMsgs, nil)
	if m := missing(stallMsgs, got); len(m) > 0 {
		t.Fatalf("%d messages not delivered again after the cut (first %d)", len(m), m[0])
	}
}

// TestAckOnWriteWaitsForTheSocket: an ack-on-write delivery is settled once
// the bytes up to its end are on the socket, not when the transport took
// them into its own buffer (the transport still holding the tail of the
// stream holds its acks back).
func TestAckOnWriteWaitsForTheSocket(t *testing.T) {
	s, err := New(testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(s, 1, &nullTransport{}, false)
	h := func(seq int) broker.Handle {
		return broker.Handle{Topic: 1, Group: 1, Seq: broker.Seq(seq), Attempt: 1}
	}
	var sizes []int
	for i := 1; i <= 3; i++ {
		d := broker.Delivery{Handle: h(i), Subject: "t", Data: []byte(strings.Repeat("x", 100*i))}
		before := c.wr.out.n
		if !c.queueDurable(&d, "1", false, false, true, nil) {
			t.Fatal("queueDurable refused")
		}
		sizes = append(sizes, c.wr.out.n-before)
	}
	_, total, _ := c.takeOut(nil, 1<<30)
	now := time.Now()
	// The socket took the first frame and half of the second.
	acks, stuck := c.afterWrite(total-sizes[0]-sizes[1]/2, now)
	if len(acks) != 1 || acks[0] != h(1) || stuck {
		t.Fatalf("with 1.5 frames on the socket: acks %v stuck %v, want [seq 1]", acks, stuck)
	}
	// Nothing moves for longer than the write deadline: stuck.
	if acks, stuck = c.afterWrite(total-sizes[0]-sizes[1]/2, now.Add(s.opts.WriteDeadline+time.Millisecond)); len(acks) != 0 || !stuck {
		t.Fatalf("no progress past the deadline: acks %v stuck %v", acks, stuck)
	}
	if acks, _ = c.afterWrite(0, now); len(acks) != 2 || acks[0] != h(2) || acks[1] != h(3) {
		t.Fatalf("all written: acks %v, want seq 2 and 3", acks)
	}
}

// TestPipelinedPollsWaitForRoom: every POLL a client pipelined was
// answered at once (leased, read and encoded) whether or not it read the
// answers, so a stalled client's POLLs made the server hold every answer
// at the same time (255 MiB of anonymous memory for 64 POLLs in the long
// form). A POLL now reserves room for its answer under max_pending and
// waits for it; the leases taken stay a few answers ahead of the socket.
func TestPipelinedPollsWaitForRoom(t *testing.T) {
	s := startDurable(t, func(o *Options) {
		outboundOptions(o)
		o.WriteDeadline = 3 * time.Second
	})
	setupStallTopic(t, s, "p")
	fillTopic(t, s, "big", stallMsgs, stallSize)
	tp, _ := s.durable.b.Topic("big")
	g, _ := tp.FindGroup("p")
	nc := dialStalled(t, s, "CONNECT {\"fibril\":1}\r\n"+strings.Repeat("POLL big p 64\r\n", 300))
	waitFor(t, 20*time.Second, "slow consumer cut", func() bool { return s.stats.slowConsumers.Load() >= 1 })
	readDeliveries(t, nc)
	waitFor(t, 5*time.Second, "the leases back", func() bool { return g.Info().Inflight == 0 })
	// The socket buffers take a few MiB (a few hundred 8 KiB messages);
	// beyond them, max_pending (256 KiB) and one answer (64 KiB) more.
	// Answering every POLL leased the whole topic, and more (each answer
	// refused for the cut went back and was leased by the next POLL).
	leased := g.Info().Delivered
	if leased >= stallMsgs/2 {
		t.Fatalf("%d deliveries to a client that reads nothing (%d messages)", leased, stallMsgs)
	}
	got := pollAll(t, s, "big", "p", stallMsgs, nil)
	if m := missing(stallMsgs, got); len(m) > 0 {
		t.Fatalf("%d messages not delivered again after the cut (first %d)", len(m), m[0])
	}
}

// TestStalledOutputIsHeldOnce: output for a stalled consumer lived twice
// over: gnet copied all of it into its own buffer, in nodes rounded up to
// a power of two (a 33 KiB delivery took 64 KiB), while the written chunks
// stayed pooled until the next collections; a stalled push consumer cost
// +80 MiB for max_pending 64 MiB, a POLL one +120 MiB (long form). gnet
// now holds at most transportWindow; the rest waits once, in outbox
// chunks that are full, so what max_pending counts is what it costs.
func TestStalledOutputIsHeldOnce(t *testing.T) {
	s := startDurable(t, func(o *Options) { o.WriteDeadline = 5 * time.Second })
	setupStallTopic(t, s, "g")
	dialStalled(t, s, "CONNECT {\"fibril\":1}\r\nSUB big g 1 2147483647\r\n")
	fillTopic(t, s, "big", 768, 32<<10) // 24 MiB: more than the socket buffers
	var transport, outbox, capacity int
	waitFor(t, 10*time.Second, "output held for the stalled consumer", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.clients {
			c.mu.Lock()
			transport, outbox, capacity = c.wr.outHigh, c.wr.out.n, 0
			for _, b := range c.wr.out.bufs {
				capacity += cap(b)
			}
			c.mu.Unlock()
			if transport+outbox > 8<<20 {
				return true
			}
		}
		return false
	})
	t.Logf("held: %d KiB in the transport, %d KiB in the outbox (chunks of %d KiB)", transport>>10, outbox>>10, capacity>>10)
	if limit := min(transportWindow+chunkSize, 2<<20); transport > limit {
		t.Errorf("the transport holds %d KiB, want <= %d KiB", transport>>10, limit>>10)
	}
	if capacity > outbox+2*chunkSize {
		t.Errorf("outbox chunks of %d KiB hold %d KiB", capacity>>10, outbox>>10)
	}
}

// TestClosingConnectionPollsBurnNoDeliveries: POLLs a connection had
// pipelined kept running after it was cut, between the cut (closing) and
// the release of its leases: each leased the lowest ready messages, found
// the connection closing and nacked them, and the next leased the same
// ones again, so a few cycles dead-lettered messages no consumer ever saw
// (TestStalledPollPipelineIsCut under load: "8 messages not delivered
// again after the cut (first 0)"). A closing connection now starts no
// poll.
func TestClosingConnectionPollsBurnNoDeliveries(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	w.send(`TOPIC CREATE burn` + "\r\n")
	w.expect(`^\+OK \{`)
	w.send(`GROUP CREATE burn g {"max_deliveries":2}` + "\r\n")
	w.expect(`^\+OK \{`)
	fillTopic(t, s, "burn", 4, 16)

	c, refuse := s.admit(&nullTransport{})
	if c == nil {
		t.Fatalf("admit: %q", refuse)
	}
	defer c.teardown()
	c.feed([]byte(`CONNECT {"fibril":1}` + "\r\n"))
	c.closeWith("test", nil) // cut; the leases are not given back yet
	// POLLs parsed before the cut run after it (from the lane, in the
	// field); each would lease and nack the same messages.
	for range 5 {
		c.handlePoll("burn", "g", 4, 0)
	}
	// A live consumer gets every message, each on its first attempt.
	w.send("POLL burn g 4 1000\r\n")
	for i := range 4 {
		l := w.expect(`^MSG burn 0 \$F\.\d+\.\d+\.\d+\.\d+\.\d+ \d+$`)
		if f := strings.Split(strings.Fields(l)[3], "."); f[len(f)-1] != "1" {
			t.Errorf("message %d delivered on attempt %s, want 1 (%s)", i, f[len(f)-1], l)
		}
		w.line()
	}
	w.expect(`^\+OK 4$`)
}
