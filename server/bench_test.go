package server

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// BenchmarkPlainFanOut: one publisher, one subscriber, 128-byte and 1 KiB
// messages through the real server on loopback.
func BenchmarkPlainFanOut(b *testing.B) {
	for _, size := range []int{128, 1024} {
		b.Run(strconv.Itoa(size), func(b *testing.B) { benchPlainFanOut(b, size) })
	}
}

func benchPlainFanOut(b *testing.B, size int) { benchPlainFanOutOn(b, startServer(b, nil), size) }

func benchPlainFanOutOn(b *testing.B, s *Server, size int) {
	sub := benchDial(b, s, "SUB bench 1\r\nPING\r\n")
	pub := benchDial(b, s, "")
	frame := protocol.AppendPub(nil, "bench", "", bytes.Repeat([]byte("x"), size), protocol.NoCRC)
	done := make(chan error, 1)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		// Each delivery is "MSG bench 1 <size>\r\n" + payload + CRLF.
		per := len("MSG bench 1 \r\n") + len(strconv.Itoa(size)) + size + 2
		_, err := io.CopyN(io.Discard, sub, int64(per*b.N))
		done <- err
	}()
	w := bufio.NewWriterSize(pub, 64<<10)
	for range b.N {
		w.Write(frame)
	}
	w.Flush()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDurableConfirmed: a Fibril connection publishing 128-byte
// messages to a one-partition topic on real files (group commit), 256
// unconfirmed at a time.
func BenchmarkDurableConfirmed(b *testing.B) {
	s := startServer(b, func(o *Options) { o.NoBroker = false; o.DataDir = b.TempDir() })
	c := benchDial(b, s, "CONNECT {\"fibril\":1}\r\nTOPIC CREATE dbench\r\n")
	r := bufio.NewReader(c)
	for range 2 {
		if l, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(l, "+OK") {
			b.Fatalf("setup: %q %v", l, err)
		}
	}
	frame := protocol.AppendPub(nil, "dbench", "", bytes.Repeat([]byte("x"), 128), protocol.NoCRC)
	window := make(chan struct{}, 256)
	errc := make(chan error, 1)
	b.SetBytes(128)
	b.ResetTimer()
	go func() {
		for range b.N {
			l, err := r.ReadString('\n')
			if err != nil || !strings.HasPrefix(l, "+OK 0:") {
				errc <- err
				return
			}
			<-window
		}
		errc <- nil
	}()
	for range b.N {
		window <- struct{}{}
		if _, err := c.Write(frame); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}

func benchDial(b *testing.B, s *Server, hello string) net.Conn {
	nc, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	r := bufio.NewReader(nc)
	if _, err := r.ReadString('\n'); err != nil { // INFO
		b.Fatal(err)
	}
	if hello != "" {
		nc.Write([]byte(hello))
		if strings.Contains(hello, "PING") {
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					b.Fatal(err)
				}
				if strings.HasPrefix(l, "PONG") {
					break
				}
			}
		}
	}
	if r.Buffered() > 0 {
		b.Fatal("unexpected buffered input")
	}
	return nc
}

// BenchmarkPollDrain: a Fibril consumer draining a one-partition topic of
// 1 KiB messages on real files (group commit): POLL 500, then one ACK line
// per 100 handles, as fibril-bench does. One op is one message polled,
// delivered and acked; -benchmem shows the server's allocations per
// message (the client here reuses its buffers).
func BenchmarkPollDrain(b *testing.B) {
	s := startServer(b, func(o *Options) { o.NoBroker = false; o.DataDir = b.TempDir() })
	c := benchDial(b, s, "CONNECT {\"fibril\":1}\r\nTOPIC CREATE drain\r\n")
	r := bufio.NewReaderSize(c, 1<<20)
	for range 2 {
		if l, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(l, "+OK") {
			b.Fatalf("setup: %q %v", l, err)
		}
	}
	// The backlog: b.N publishes, all confirmed before the timer starts.
	frame := protocol.AppendPub(nil, "drain", "", bytes.Repeat([]byte("x"), 1024), protocol.NoCRC)
	window := make(chan struct{}, 512) // under max_unconfirmed
	go func() {
		for range b.N {
			window <- struct{}{}
			c.Write(frame)
		}
	}()
	for i := 0; i < b.N; i++ {
		if l, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(l, "+OK 0:") {
			b.Fatalf("confirm %d: %q %v", i, l, err)
		}
		<-window
	}
	p := protocol.NewParser(protocol.ServerToClient, protocol.Limits{})
	var handles []protocol.Handle
	var out []byte
	got, oks := 0, 0
	h := protocol.HandlerFunc(func(cmd *protocol.Command) error {
		switch cmd.Op {
		case protocol.OpMsg:
			hd, err := protocol.ParseHandle(cmd.Reply)
			if err != nil {
				return err
			}
			handles = append(handles, hd)
			got++
		case protocol.OpOK:
			oks++
		default:
			b.Fatalf("unexpected %v", cmd.Op)
		}
		return nil
	})
	buf := make([]byte, 0, 2<<20)
	read := func() { // read more and parse what is complete; keep the rest
		n, err := r.Read(buf[len(buf):cap(buf)])
		if err != nil {
			b.Fatal(err)
		}
		buf = buf[:len(buf)+n]
		used, err := p.Parse(buf, h)
		if err != nil {
			b.Fatal(err)
		}
		buf = buf[:copy(buf, buf[used:])]
	}
	b.SetBytes(1024)
	b.ReportAllocs()
	b.ResetTimer()
	expectOK := 0
	for got < b.N {
		out = protocol.AppendPoll(out[:0], "drain", "g", 500, 1000)
		expectOK++
		if _, err := c.Write(out); err != nil {
			b.Fatal(err)
		}
		for oks < expectOK {
			read()
		}
		out = out[:0]
		for len(handles) > 0 {
			k := min(100, len(handles))
			out = protocol.AppendAck(out, handles[:k]...)
			handles = handles[k:]
			expectOK++
		}
		handles = handles[:0]
		if _, err := c.Write(out); err != nil {
			b.Fatal(err)
		}
	}
	for oks < expectOK {
		read()
	}
}
