package server

import (
	"bytes"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/memstore"
)

// FuzzConnFeed feeds random bytes, split at random points, to a connection
// of a real server (engine off) through the same path gnet uses: the server
// must never panic, and a connection's unparsed input stays bounded.
func FuzzConnFeed(f *testing.F) {
	seeds := []string{
		"CONNECT {\"verbose\":true}\r\nPING\r\n",
		"CONNECT {\"fibril\":1,\"crc\":true}\r\nPUB a 5 3610a686\r\nhello\r\n",
		"SUB a.* q 1\r\nPUB a.b r 2\r\nhi\r\nUNSUB 1 3\r\n",
		"HPUB h 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
		"CONNECT {\"fibril\":1}\r\nPOLL t g 10 5\r\nACK $F.1.1.0.1.1\r\nTOPIC LIST\r\n",
		"PUB $F.1.2.0.3.1 4\r\n+ACK\r\n",
		"PUB a 99999999999\r\n",
		"\r\n\r\n\n\nping\npong\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s), uint16(3))
	}
	s, err := New(testOptions(f, func(o *Options) { o.MaxPayload = 1024; o.MaxInputBuffer = 8192 }))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, split uint16) { fuzzFeed(t, s, data, split) })
}

// FuzzConnFeedDurable is FuzzConnFeed with the durable engine on (in-memory
// stores), so random management verbs, polls and settles reach it.
func FuzzConnFeedDurable(f *testing.F) {
	seeds := []string{
		"CONNECT {\"fibril\":1}\r\nTOPIC CREATE t {\"partitions\":2}\r\nPUB t 2\r\nhi\r\nPOLL t g 10\r\n",
		"CONNECT {\"fibril\":1,\"crc\":true}\r\nPUB auto.x 2 -\r\nhi\r\nSUB auto.x g 5 2\r\nUNSUB 5\r\n",
		"CONNECT {\"fibril\":1}\r\nGROUP CREATE t g {\"lease_ms\":5}\r\nACK $F.1.1.0.1.1 $F.1.1.1.1.1\r\nNACK $F.1.1.0.1.1 5\r\nREJECT $F.1.1.0.1.1\r\nEXTEND $F.1.1.0.1.1 9\r\n",
		"CONNECT {}\r\nSUB t q 1\r\nPUB $F.1.1.0.1.1 4\r\n-NAK\r\nTOPIC DELETE t\r\nGROUP LIST t\r\n",
	}
	for _, sd := range seeds {
		f.Add([]byte(sd), uint16(7))
	}
	ms := memstore.New()
	s, err := New(testOptions(f, func(o *Options) {
		o.MaxPayload = 1024
		o.MaxInputBuffer = 8192
		o.NoBroker = false
		o.Engine.OpenStore = ms.Open
		o.MaxPollWait = 50 * time.Millisecond
	}))
	if err != nil {
		f.Fatal(err)
	}
	if err := s.openDurable(); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(s.closeDurable)
	f.Fuzz(func(t *testing.T, data []byte, split uint16) { fuzzFeed(t, s, data, split) })
}

// fuzzFeed drives one connection of s with data split every split bytes.
func fuzzFeed(t *testing.T, s *Server, data []byte, split uint16) {
	{
		tr := &nullTransport{}
		c, _ := s.admit(tr)
		if c == nil {
			t.Skip("server refused")
		}
		defer c.teardown()
		var pending []byte
		step := int(split%64) + 1
		for i := 0; i < len(data); i += step {
			pending = append(pending, data[i:min(i+step, len(data))]...)
			used := c.feed(pending)
			if used < 0 || used > len(pending) {
				t.Fatalf("feed consumed %d of %d", used, len(pending))
			}
			pending = append(pending[:0], pending[used:]...)
			if c.isClosing() {
				return
			}
			if len(pending) > s.opts.MaxControlLine+s.opts.MaxPayload+2+(1<<20) {
				t.Fatalf("unparsed input grew to %d", len(pending))
			}
		}
		bufs, _, _ := c.takeOut(nil, 1<<30)
		out := bytes.Join(bufs, nil)
		if bytes.Contains(out, []byte("panic")) {
			t.Fatalf("output mentions panic: %q", out)
		}
	}
}

// nullTransport discards output; used to drive a client without a socket.
type nullTransport struct{}

func (*nullTransport) wake()              {}
func (*nullTransport) close()             {}
func (*nullTransport) remoteAddr() string { return "fuzz" }
func (*nullTransport) isTLS() bool        { return false }
