package fibril

// No server answers not_leader on demand yet (there is no cluster), so the
// resend path is tested against a protocol peer written here: a loopback
// listener that does the handshake and answers as each test scripts.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// peer accepts connections on loopback one after the other; each is
// handshaken (INFO, CONNECT, +OK) and handed to script with its number
// (0 first). The listener closes in cleanup.
func peer(t *testing.T, script func(n int, r *bufio.Reader, nc net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for n := 0; ; n++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				if _, err := nc.Write([]byte(`INFO {"fibril":1,"max_payload":1048576,"max_unconfirmed":64}` + "\r\n")); err != nil {
					return
				}
				r := bufio.NewReader(nc)
				if _, err := r.ReadString('\n'); err != nil { // CONNECT
					return
				}
				if _, err := nc.Write([]byte("+OK\r\n")); err != nil {
					return
				}
				script(n, r, nc)
			}()
		}
	}()
	return ln.Addr().String()
}

// readPayloads reads n PUB frames (CRC off) and returns their payloads; it
// skips PINGs, answering them. ok is false when the connection ended first.
func readPayloads(r *bufio.Reader, nc net.Conn, n int) (got []string, ok bool) {
	for len(got) < n {
		line, err := r.ReadString('\n')
		if err != nil {
			return got, false
		}
		if strings.HasPrefix(line, "PING") {
			if _, err := nc.Write([]byte("PONG\r\n")); err != nil {
				return got, false
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "PUB" {
			return got, false
		}
		size, err := strconv.Atoi(f[len(f)-1])
		if err != nil {
			return got, false
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return got, false
		}
		got = append(got, string(b[:size]))
	}
	return got, true
}

// notLeaderErr is the server's not_leader answer, as the server encodes it.
var notLeaderErr = string(protocol.AppendError(nil, protocol.NewError(protocol.CodeNotLeader, ""), true))

// TestNotLeaderPublishIsResent: publishes answered not_leader are resent on
// the same connection, in the order they were sent, as often as the peer
// answers not_leader, and end with the confirm of the resend; the
// publishes between them are confirmed as answered.
func TestNotLeaderPublishIsResent(t *testing.T) {
	ctx := settleCtx(t)
	seen := make(chan []string, 1)
	addr := peer(t, func(n int, r *bufio.Reader, nc net.Conn) {
		var all []string
		got, ok := readPayloads(r, nc, 5)
		all = append(all, got...)
		if !ok {
			seen <- all
			return
		}
		_, _ = nc.Write([]byte("+OK 0:1\r\n" + notLeaderErr + notLeaderErr + "+OK 0:2\r\n+OK 0:3\r\n"))
		// the resends: not_leader once more, then confirmed
		got, ok = readPayloads(r, nc, 2)
		all = append(all, got...)
		if ok {
			_, _ = nc.Write([]byte(notLeaderErr + notLeaderErr))
			got, ok = readPayloads(r, nc, 2)
			all = append(all, got...)
			if ok {
				_, _ = nc.Write([]byte("+OK 0:4\r\n+OK 0:5\r\n"))
			}
		}
		seen <- all
		_, _ = r.ReadString('\n') // hold the connection until the client goes
	})
	c, err := Connect(ctx, addr, WithCRC(false), WithoutReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var futs []*PubFuture
	for i := range 5 {
		f, err := c.PublishAsync(ctx, "s", []byte("p"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	want := []uint64{1, 4, 5, 2, 3} // publishes 1 and 2 were resent twice
	for i, f := range futs {
		p, err := f.Wait(ctx)
		if err != nil || p.Seq != want[i] {
			t.Fatalf("publish %d: %v, %v; want 0:%d", i, p, err, want[i])
		}
	}
	if got, wantOrder := <-seen, []string{"p0", "p1", "p2", "p3", "p4", "p1", "p2", "p1", "p2"}; !slices.Equal(got, wantOrder) {
		t.Fatalf("peer received %v, want %v", got, wantOrder)
	}
	if n := c.window.held(); n != 0 {
		t.Fatalf("%d window tokens held after every publish was confirmed", n)
	}
}

// TestNotLeaderPublishFailsWhenItsContextEnds: a publish whose context has
// ended by the time it is answered not_leader is not resent; it fails with
// the not_leader error, which is retriable.
func TestNotLeaderPublishFailsWhenItsContextEnds(t *testing.T) {
	ctx := settleCtx(t)
	answer := make(chan struct{})
	seen := make(chan []string, 1)
	addr := peer(t, func(n int, r *bufio.Reader, nc net.Conn) {
		got, ok := readPayloads(r, nc, 1)
		if !ok {
			seen <- got
			return
		}
		<-answer
		_, _ = nc.Write([]byte(notLeaderErr))
		// the next publish must be the new one, not a resend
		more, _ := readPayloads(r, nc, 1)
		_, _ = nc.Write([]byte("+OK 0:1\r\n"))
		seen <- append(got, more...)
		_, _ = r.ReadString('\n')
	})
	c, err := Connect(ctx, addr, WithCRC(false), WithoutReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pctx, cancel := context.WithCancel(ctx)
	f, err := c.PublishAsync(pctx, "s", []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	close(answer)
	_, err = f.Wait(ctx)
	var fe *Error
	if !errors.Is(err, ErrNotLeader) || !errors.As(err, &fe) || !fe.Retriable() {
		t.Fatalf("publish answered not_leader after its ctx ended: %v, want a retriable ErrNotLeader", err)
	}
	if _, err := c.Publish(ctx, "s", []byte("second")); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("peer received %v, want [first second] (no resend)", got)
	}
}

// TestNotLeaderPublishFailsAfterRequestTimeout: a publish answered
// not_leader every time is resent until WithRequestTimeout has passed, then
// fails with the not_leader error instead of being resent for ever.
func TestNotLeaderPublishFailsAfterRequestTimeout(t *testing.T) {
	ctx := settleCtx(t)
	addr := peer(t, func(n int, r *bufio.Reader, nc net.Conn) {
		for {
			if _, ok := readPayloads(r, nc, 1); !ok {
				return
			}
			if _, err := nc.Write([]byte(notLeaderErr)); err != nil {
				return
			}
		}
	})
	c, err := Connect(ctx, addr, WithCRC(false), WithoutReconnect(), WithRequestTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := c.PublishAsync(context.Background(), "s", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err = f.Wait(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("publish answered not_leader for ever: %v, want ErrNotLeader", err)
	}
}

// TestNotLeaderOtherCommandFails: a command other than a publish answered
// not_leader fails with it (retriable) and is not sent again.
func TestNotLeaderOtherCommandFails(t *testing.T) {
	ctx := settleCtx(t)
	seen := make(chan []string, 1)
	addr := peer(t, func(n int, r *bufio.Reader, nc net.Conn) {
		var lines []string
		for len(lines) < 2 {
			line, err := r.ReadString('\n')
			if err != nil {
				break
			}
			lines = append(lines, strings.TrimSpace(line))
			answer := notLeaderErr
			if strings.HasPrefix(line, "PING") {
				answer = "PONG\r\n"
			}
			if _, err := nc.Write([]byte(answer)); err != nil {
				break
			}
		}
		seen <- lines
		_, _ = r.ReadString('\n')
	})
	c, err := Connect(ctx, addr, WithCRC(false), WithoutReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.DeleteTopic(ctx, "orders")
	var fe *Error
	if !errors.Is(err, ErrNotLeader) || !errors.As(err, &fe) || !fe.Retriable() {
		t.Fatalf("DeleteTopic answered not_leader: %v, want a retriable ErrNotLeader", err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; !slices.Equal(got, []string{"TOPIC DELETE orders", "PING"}) {
		t.Fatalf("peer received %q, want the command once, then PING", got)
	}
}

// TestNotLeaderHeldPublishesReplayedFirst: publishes answered not_leader
// when the connection is lost are replayed on the next one in the order
// they were first sent, before a publish made while disconnected.
func TestNotLeaderHeldPublishesReplayedFirst(t *testing.T) {
	ctx := settleCtx(t)
	seen := make(chan []string, 1)
	lost := make(chan struct{})
	addr := peer(t, func(n int, r *bufio.Reader, nc net.Conn) {
		switch n {
		case 0:
			if _, ok := readPayloads(r, nc, 3); ok {
				_, _ = nc.Write([]byte(notLeaderErr + "+OK 0:1\r\n" + notLeaderErr))
			}
			<-lost // the test has seen p1 confirmed
		case 1:
			got, ok := readPayloads(r, nc, 3)
			if ok {
				_, _ = nc.Write([]byte("+OK 0:2\r\n+OK 0:3\r\n+OK 0:4\r\n"))
			}
			seen <- got
			_, _ = r.ReadString('\n')
		}
	})
	c, err := Connect(ctx, addr, WithCRC(false), WithReconnect(ReconnectPolicy{
		InitialDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond, Multiplier: 2, BufferBytes: 1 << 20,
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var futs []*PubFuture
	for i := range 3 {
		f, err := c.PublishAsync(ctx, "s", []byte("p"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	if p, err := futs[1].Wait(ctx); err != nil || p.Seq != 1 {
		t.Fatalf("publish 1: %v %v", p, err)
	}
	// p0 and p2 are held (or resent); the peer drops the connection
	close(lost)
	waitForCond(t, func() bool { return !c.IsConnected() || c.Reconnects() > 0 })
	f3, err := c.PublishAsync(ctx, "s", []byte("p3"))
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range []*PubFuture{futs[0], futs[2], f3} {
		if p, err := f.Wait(ctx); err != nil || p.Seq != uint64(i+2) {
			t.Fatalf("publish %d after the reconnect: %v %v, want 0:%d", i, p, err, i+2)
		}
	}
	if got := <-seen; !slices.Equal(got, []string{"p0", "p2", "p3"}) {
		t.Fatalf("second connection received %v, want [p0 p2 p3]", got)
	}
}

// waitForCond polls cond for up to 10 s.
func waitForCond(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestNotLeaderDelay(t *testing.T) {
	want := []time.Duration{50, 100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := notLeaderDelay(uint8(i)); got != w*time.Millisecond {
			t.Errorf("notLeaderDelay(%d) = %v, want %v", i, got, w*time.Millisecond)
		}
	}
	if got := notLeaderDelay(255); got != notLeaderMaxDelay {
		t.Errorf("notLeaderDelay(255) = %v", got)
	}
}

// TestDrainWaitsForNotLeaderResend: Drain returns once a publish answered
// not_leader has been resent and confirmed, not when the PING sent after
// it is answered (Close would then fail it with ErrClosed). The peer
// answers not_leader and the PONG in one write, so both are settled in
// one batch.
func TestDrainWaitsForNotLeaderResend(t *testing.T) {
	ctx := settleCtx(t)
	addr := peer(t, func(n int, r *bufio.Reader, nc net.Conn) {
		if _, ok := readPayloads(r, nc, 1); !ok {
			return
		}
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "PING") {
			return
		}
		if _, err := nc.Write([]byte(notLeaderErr + "PONG\r\n")); err != nil {
			return
		}
		if _, ok := readPayloads(r, nc, 1); ok {
			_, _ = nc.Write([]byte("+OK 0:7\r\n"))
		}
		_, _ = r.ReadString('\n')
	})
	c, err := Connect(ctx, addr, WithCRC(false), WithoutReconnect())
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.PublishAsync(ctx, "s", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if p, err := f.Result(); err != nil || p.Seq != 7 {
		t.Fatalf("publish after Drain: %v %v, want 0:7 (Drain must wait for the resend)", p, err)
	}
}
