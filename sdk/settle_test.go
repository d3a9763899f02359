package fibril

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scriptedServer accepts one connection on loopback, does the handshake
// (INFO with max_unconfirmed window, CONNECT, +OK) and runs script on it.
func scriptedServer(t *testing.T, window int, script func(r *bufio.Reader, nc net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		info := `INFO {"fibril":1,"max_payload":1048576,"max_unconfirmed":` + strconv.Itoa(window) + "}\r\n"
		if _, err := nc.Write([]byte(info)); err != nil {
			return
		}
		r := bufio.NewReader(nc)
		if _, err := r.ReadString('\n'); err != nil { // CONNECT
			return
		}
		if _, err := nc.Write([]byte("+OK\r\n")); err != nil {
			return
		}
		script(r, nc)
	}()
	return ln.Addr().String()
}

// readPubs reads n PUB frames (CRC off) and reports whether all came.
func readPubs(r *bufio.Reader, n int) bool {
	for i := 0; i < n; i++ {
		line, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "PUB ") {
			return false
		}
		f := strings.Fields(line)
		size, err := strconv.Atoi(f[len(f)-1])
		if err != nil {
			return false
		}
		if _, err := r.Discard(size + 2); err != nil {
			return false
		}
	}
	return true
}

func settleCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestSettleConfirmsBeforeTheLoss: confirms that arrive in the same read
// as a frame that ends the connection complete their publishes (settled
// one by one they were done before the bad frame was parsed; settled as
// a batch they must still be settled before the loss fails or replays
// the rest).
func TestSettleConfirmsBeforeTheLoss(t *testing.T) {
	ctx := settleCtx(t)
	addr := scriptedServer(t, 16, func(r *bufio.Reader, nc net.Conn) {
		if readPubs(r, 5) {
			_, _ = nc.Write([]byte("+OK 0:1\r\n+OK 0:2\r\n+OK 0:3\r\nBOGUS 1 2 3\r\n"))
		}
	})
	c, err := Connect(ctx, addr, WithCRC(false), WithoutReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	futs := make([]*PubFuture, 5)
	for i := range futs {
		if futs[i], err = c.PublishAsync(ctx, "s", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for i, f := range futs {
		p, err := f.Wait(ctx)
		switch {
		case i < 3 && (err != nil || p != Position{Partition: 0, Seq: uint64(i + 1), Stored: true}):
			t.Fatalf("publish %d: %v, %v; want 0:%d", i, p, err, i+1)
		case i >= 3 && err == nil:
			t.Fatalf("publish %d confirmed (%v) with no confirm sent", i, p)
		}
	}
}

// TestSettleFullWindowInOneRead: a whole window confirmed in one write is
// settled in order, and its tokens let a publisher blocked on the full
// window through.
func TestSettleFullWindowInOneRead(t *testing.T) {
	ctx := settleCtx(t)
	const window = 100 // over maxAnswerBatch: the read is settled in pieces
	done := make(chan struct{})
	addr := scriptedServer(t, window, func(r *bufio.Reader, nc net.Conn) {
		if !readPubs(r, window) {
			return
		}
		var b strings.Builder
		for i := 1; i <= window; i++ {
			b.WriteString("+OK 2:" + strconv.Itoa(10+i) + "\r\n")
		}
		_, _ = nc.Write([]byte(b.String()))
		if readPubs(r, 1) {
			_, _ = nc.Write([]byte("+OK 2:99\r\n"))
		}
		<-done
	})
	defer close(done)
	c, err := Connect(ctx, addr, WithCRC(false), WithoutReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	futs := make([]*PubFuture, window+1)
	for i := range futs { // the last waits for the window
		if futs[i], err = c.PublishAsync(ctx, "s", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for i, f := range futs {
		want := uint64(10 + i + 1)
		if i == window {
			want = 99
		}
		if p, err := f.Wait(ctx); err != nil || p.Seq != want || p.Partition != 2 {
			t.Fatalf("publish %d: %v, %v; want 2:%d", i, p, err, want)
		}
	}
	if n := c.window.held(); n != 0 {
		t.Fatalf("%d window tokens held after every confirm", n)
	}
}

// TestSettleAnswerWithNoRequest: an answer beyond the requests pending
// gives the connection up (the stream is out of step); the requests the
// read's answers did match are completed first.
func TestSettleAnswerWithNoRequest(t *testing.T) {
	ctx := settleCtx(t)
	done := make(chan struct{})
	addr := scriptedServer(t, 16, func(r *bufio.Reader, nc net.Conn) {
		if readPubs(r, 1) {
			_, _ = nc.Write([]byte("+OK 0:7\r\n+OK 0:8\r\n"))
		}
		<-done
	})
	defer close(done)
	c, err := Connect(ctx, addr, WithCRC(false), WithoutReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := c.PublishAsync(ctx, "s", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := f.Wait(ctx); err != nil || p.Seq != 7 {
		t.Fatalf("publish: %v, %v; want 0:7", p, err)
	}
	select {
	case <-c.closed:
	case <-ctx.Done():
		t.Fatal("the connection was kept after an answer with no request")
	}
	if err := c.closeReason(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("closed for %v, want ErrProtocol", err)
	}
}

// TestSettleDeliveriesInOneRead: a confirm, a POLL's deliveries and its
// +OK in one write: the confirm completes its publish and the deliveries
// go to the POLL (the head of the fifo once the confirm took its publish),
// in order.
func TestSettleDeliveriesInOneRead(t *testing.T) {
	ctx := settleCtx(t)
	done := make(chan struct{})
	addr := scriptedServer(t, 16, func(r *bufio.Reader, nc net.Conn) {
		if !readPubs(r, 1) {
			return
		}
		if l, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(l, "POLL ") {
			return
		}
		_, _ = nc.Write([]byte("+OK 0:1\r\nMSG t 0 $F.1.1.0.1.1 1\r\na\r\nMSG t 0 $F.1.1.0.2.1 1\r\nb\r\n+OK 2\r\n"))
		<-done
	})
	defer close(done)
	c, err := Connect(ctx, addr, WithCRC(false), WithoutReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := c.PublishAsync(ctx, "t", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Fetch(ctx, "t", "g", 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := f.Wait(ctx); err != nil || p.Seq != 1 {
		t.Fatalf("publish: %v, %v; want 0:1", p, err)
	}
	if len(msgs) != 2 || string(msgs[0].Data) != "a" || string(msgs[1].Data) != "b" {
		t.Fatalf("POLL got %d messages %v", len(msgs), msgs)
	}
}

// TestSettleDeliveryWithNoPoll: a sid-0 delivery where the head of the
// fifo is not a POLL gives the connection up; the confirm before it in
// the same read still completes its publish.
func TestSettleDeliveryWithNoPoll(t *testing.T) {
	ctx := settleCtx(t)
	done := make(chan struct{})
	addr := scriptedServer(t, 16, func(r *bufio.Reader, nc net.Conn) {
		if readPubs(r, 2) {
			_, _ = nc.Write([]byte("+OK 0:1\r\nMSG t 0 $F.1.1.0.1.1 1\r\na\r\n+OK 0:2\r\n"))
		}
		<-done
	})
	defer close(done)
	c, err := Connect(ctx, addr, WithCRC(false), WithoutReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f1, err := c.PublishAsync(ctx, "t", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	f2, err := c.PublishAsync(ctx, "t", []byte("y"))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := f1.Wait(ctx); err != nil || p.Seq != 1 {
		t.Fatalf("publish 1: %v, %v; want 0:1", p, err)
	}
	if p, err := f2.Wait(ctx); err == nil {
		t.Fatalf("publish 2 confirmed (%v) after a delivery out of step", p)
	}
	<-c.closed
	if err := c.closeReason(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("closed for %v, want ErrProtocol", err)
	}
}
