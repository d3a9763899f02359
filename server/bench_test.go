package server

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// BenchmarkPlainFanOut: one publisher, one subscriber, 128-byte messages
// through the real server on loopback.
func BenchmarkPlainFanOut(b *testing.B) {
	s := startServer(b, nil)
	sub := benchDial(b, s, "SUB bench 1\r\nPING\r\n")
	pub := benchDial(b, s, "")
	frame := protocol.AppendPub(nil, "bench", "", bytes.Repeat([]byte("x"), 128), protocol.NoCRC)
	done := make(chan error, 1)
	b.SetBytes(128)
	b.ResetTimer()
	go func() {
		// Each delivery is "MSG bench 1 128\r\n" + 128 + CRLF.
		per := len("MSG bench 1 128\r\n") + 130
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
