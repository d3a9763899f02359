package tui

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// FuzzDialTarget: any string gives an address and credentials or an error,
// never a panic; an accepted address always splits into host and port.
func FuzzDialTarget(f *testing.F) {
	for _, s := range []string{"127.0.0.1:4222", "nats://u:p@h:1", "fibril://tok@[::1]:9", "nats://", "::", "h:1:2", "%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		addr, _, err := dialTarget(s)
		if err != nil {
			return
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			t.Fatalf("dialTarget(%q) accepted %q: %v", s, addr, err)
		}
	})
}

// FuzzClientAnswers: whatever a server sends after a valid INFO and +OK,
// the client's requests end with a value or an error, never a panic or a
// hang.
func FuzzClientAnswers(f *testing.F) {
	for _, s := range []string{
		"+OK {\"topics\":[\"a\"]}\r\n",
		"-ERR 'no_topic no such topic'\r\n",
		"PING\r\n+OK {\"topics\":[]}\r\n",
		"MSG a 0 $F.1.1.0.1.1 2\r\nhi\r\n+OK 1\r\n+OK\r\n",
		"MSG a 0 bad 2\r\nhi\r\n+OK 1\r\n",
		"+OK 3:4\r\n+OK -\r\n",
		"INFO {}\r\n+OK not json\r\n",
		"GARBAGE\r\n",
		"+OK {\"topics\":",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		srv, cli := net.Pipe()
		defer cli.Close()
		go func() {
			defer srv.Close()
			_ = srv.SetDeadline(time.Now().Add(2 * time.Second))
			_, _ = srv.Write([]byte("INFO {\"server_id\":\"x\",\"fibril\":1,\"max_unconfirmed\":4}\r\n"))
			buf := make([]byte, 4096)
			_, _ = srv.Read(buf) // CONNECT
			_, _ = srv.Write([]byte("+OK\r\n"))
			// net.Pipe has no buffer: drain the client's requests so its
			// writes never wait for this goroutine.
			go func() { _, _ = io.Copy(io.Discard, srv) }()
			_, _ = srv.Write(data)
		}()
		c, err := newClient(cli, protocol.Connect{}, time.Second)
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		// Drain whatever the server wrote after the handshake.
		_, _ = c.topicList()
		_, _ = c.consume("a", "g", 3)
		_, _ = c.publish("a", 2, func(int) []byte { return []byte("x") })
	})
}
