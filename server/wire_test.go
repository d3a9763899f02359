package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

func TestInfoOnConnect(t *testing.T) {
	s := startServer(t, nil)
	w := dial(t, s.Addr().String())
	l := w.expect(`^INFO `)
	info, err := protocol.ParseInfo([]byte(strings.TrimPrefix(l, "INFO ")))
	if err != nil {
		t.Fatalf("INFO json: %v", err)
	}
	if info.Fibril != 1 || info.MaxPayload != int64(s.opts.MaxPayload) || info.MaxControlLine != s.opts.MaxControlLine || info.ServerID != s.ID() ||
		info.MaxUnconfirmed != s.opts.MaxUnconfirmed || !info.Headers {
		t.Fatalf("unexpected INFO %+v", info)
	}
	if want := s.Addr().String(); fmt.Sprintf("%s:%d", info.Host, info.Port) != want {
		t.Fatalf("INFO host:port %s:%d, want %s", info.Host, info.Port, want)
	}
}

func TestPingPongAndVerbose(t *testing.T) {
	s := startServer(t, nil)
	w := dialInfo(t, s)
	w.send("PING\r\n")
	w.expect("^PONG$")
	w.send("CONNECT {\"verbose\":true}\r\nping\r\n")
	w.expect(`^\+OK$`)
	w.expect("^PONG$")
}

func TestPubSubFanOut(t *testing.T) {
	s := startServer(t, nil)
	a, b := dialInfo(t, s), dialInfo(t, s)
	a.send("CONNECT {\"headers\":true}\r\nSUB foo.* 1\r\nSUB foo.> 2\r\nSUB bar 3\r\nPING\r\n")
	a.expect("^PONG$")
	b.send("CONNECT {}\r\nPUB foo.x reply.to 5\r\nhello\r\nHPUB foo.y 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n")
	b.expect("^PONG$")
	got := map[string]bool{}
	for range 4 {
		l := a.expect(`^H?MSG `)
		got[l] = true
		if strings.HasPrefix(l, "HMSG") {
			a.expectBody("NATS/1.0\r\n\r\nhi")
		} else {
			a.expectBody("hello")
		}
	}
	for _, want := range []string{"MSG foo.x 1 reply.to 5", "MSG foo.x 2 reply.to 5", "HMSG foo.y 1 12 14", "HMSG foo.y 2 12 14"} {
		if !got[want] {
			t.Errorf("missing %q in %v", want, got)
		}
	}
}

func TestHeadersStrippedForPlainClients(t *testing.T) {
	s := startServer(t, nil)
	a := dialInfo(t, s)
	a.send("CONNECT {}\r\nSUB h 1\r\nHPUB h 12 14\r\nNATS/1.0\r\n\r\nhi\r\n")
	a.expect("^MSG h 1 2$")
	a.expectBody("hi")
}

func TestQueueGroupOneMember(t *testing.T) {
	s := startServer(t, nil)
	subs := []*wireConn{dialInfo(t, s), dialInfo(t, s), dialInfo(t, s)}
	for _, w := range subs {
		w.send("SUB work q 1\r\nPING\r\n")
		w.expect("^PONG$")
	}
	pub := dialInfo(t, s)
	const n = 30
	for i := range n {
		pub.send(fmt.Sprintf("PUB work %d\r\n%d\r\n", len(fmt.Sprint(i)), i))
	}
	pub.send("PING\r\n")
	pub.expect("^PONG$")
	total := 0
	for _, w := range subs {
		w.send("PING\r\n")
		for {
			l := w.expect(`^(MSG work 1 \d+|PONG)$`)
			if l == "PONG" {
				break
			}
			if _, err := w.line(); err != nil {
				t.Fatal(err)
			}
			total++
		}
	}
	if total != n {
		t.Fatalf("queue group got %d deliveries, want exactly %d", total, n)
	}
}

func TestUnsubMax(t *testing.T) {
	s := startServer(t, nil)
	w := dialInfo(t, s)
	w.send("SUB x 7\r\nUNSUB 7 2\r\nPUB x 1\r\na\r\nPUB x 1\r\nb\r\nPUB x 1\r\nc\r\nPING\r\n")
	w.expect("^MSG x 7 1$")
	w.expectBody("a")
	w.expect("^MSG x 7 1$")
	w.expectBody("b")
	w.expect("^PONG$")
	waitFor(t, 2*time.Second, "subscription removed", func() bool {
		s.subs.mu.RLock()
		defer s.subs.mu.RUnlock()
		return s.subs.count == 0
	})
}

func TestFibrilStrictAnswers(t *testing.T) {
	s := startServer(t, nil)
	w := dialInfo(t, s)
	w.send("CONNECT {\"fibril\":1}\r\nSUB a 1\r\nPUB a 1\r\nx\r\nUNSUB 1\r\nPING\r\nPUB $bad 1\r\nx\r\n")
	w.expect(`^\+OK$`) // CONNECT
	w.expect(`^\+OK$`) // SUB
	w.expect(`^MSG a 1 1$`)
	w.expectBody("x")
	w.expect(`^\+OK -$`) // PUB, no durable topic
	w.expect(`^\+OK$`)   // UNSUB
	w.expect(`^PONG$`)
	w.expect(`^-ERR 'reserved_subject `)
}

func TestCRCMode(t *testing.T) {
	s := startServer(t, nil)
	w := dialInfo(t, s)
	// crc32("hello") = 3610a686
	w.send("CONNECT {\"crc\":true,\"confirm\":true}\r\nSUB c 1\r\nPUB c 5 3610a686\r\nhello\r\nPUB c 5 00000000\r\nhello\r\nPUB c 5 -\r\nhello\r\nPING\r\n")
	w.expect(`^MSG c 1 5 3610a686$`)
	w.expectBody("hello")
	w.expect(`^\+OK -$`)
	w.expect(`^-ERR '`)
	w.expect(`^MSG c 1 5 3610a686$`)
	w.expectBody("hello")
	w.expect(`^\+OK -$`)
	w.expect(`^PONG$`)
}

func TestLimitsCloseConnection(t *testing.T) {
	s := startServer(t, func(o *Options) { o.MaxPayload = 16; o.MaxControlLine = 64; o.MaxInputBuffer = 128 })
	cases := []struct{ name, send, want string }{
		{"payload", "PUB a 17\r\n", `^-ERR 'Maximum Payload Violation'$`},
		{"control", "SUB " + strings.Repeat("a", 100) + " 1\r\n", `^-ERR 'Maximum Control Line Exceeded'$`},
		{"control-no-newline", strings.Repeat("b", 100), `^-ERR 'Maximum Control Line Exceeded'$`},
		{"unknown", "FOO\r\n", `^-ERR 'Unknown Protocol Operation'$`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := dialInfo(t, s)
			w.send(tc.send)
			w.expect(tc.want)
			w.expectClosed()
		})
	}
}

func TestMaxSubsPerConn(t *testing.T) {
	s := startServer(t, func(o *Options) { o.MaxSubsPerConn = 2 })
	w := dialInfo(t, s)
	w.send("CONNECT {\"fibril\":1}\r\nSUB a 1\r\nSUB b 2\r\nSUB c 3\r\nUNSUB 1\r\nSUB c 3\r\n")
	w.expect(`^\+OK$`)
	w.expect(`^\+OK$`)
	w.expect(`^\+OK$`)
	w.expect(`^-ERR 'max_subscriptions `)
	w.expect(`^\+OK$`)
	w.expect(`^\+OK$`)
}

func TestMaxConnections(t *testing.T) {
	s := startServer(t, func(o *Options) { o.MaxConnections = 1 })
	a := dialInfo(t, s)
	b := dial(t, s.Addr().String())
	b.expect(`^-ERR 'maximum connections exceeded'$`)
	b.expectClosed()
	a.send("PING\r\n")
	a.expect("^PONG$")
}

func TestHeartbeatClosesStale(t *testing.T) {
	s := startServer(t, func(o *Options) { o.PingInterval = 50 * time.Millisecond; o.MaxPingsOut = 2 })
	w := dialInfo(t, s)
	w.expect("^PING$")
	w.send("PONG\r\n")
	w.expect("^PING$")
	w.expect("^PING$")
	w.expect(`^-ERR 'Stale Connection'$`)
	w.expectClosed()
}

func TestSlowConsumerClosed(t *testing.T) {
	s := startServer(t, func(o *Options) { o.MaxPending = 64 << 10 })
	slow := dialInfo(t, s)
	slow.send("SUB big 1\r\nPING\r\n")
	slow.expect("^PONG$")
	pub := dialInfo(t, s)
	payload := strings.Repeat("z", 60<<10)
	// The slow side never reads: kernel buffers fill, then MaxPending.
	closed := false
	for i := 0; i < 400 && !closed; i++ {
		pub.send(fmt.Sprintf("PUB big %d\r\n%s\r\n", len(payload), payload))
		if i%20 == 19 {
			pub.send("PING\r\n")
			pub.expect("^PONG$")
			closed = liveClients(s) == 1
		}
	}
	if !closed {
		t.Fatal("slow consumer was not closed")
	}
	// Its socket lingers half-closed (linger.go), then goes.
	waitFor(t, lingerTime+5*time.Second, "slow consumer forgotten", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.clients) == 1
	})
}

// liveClients counts the connections that are not closing.
func liveClients(s *Server) int {
	s.mu.Lock()
	cls := make([]*client, 0, len(s.clients))
	for _, c := range s.clients {
		cls = append(cls, c)
	}
	s.mu.Unlock()
	n := 0
	for _, c := range cls {
		if !c.isClosing() {
			n++
		}
	}
	return n
}

func TestClientNotReadingIsBounded(t *testing.T) {
	s := startServer(t, func(o *Options) {
		o.MaxPending = 16 << 10
		o.MaxPayload = 1024
		o.MaxInputBuffer = 16 << 10
	})
	w := dialInfo(t, s)
	// A small receive window, so the kernel holds few of the answers.
	_ = w.nc.(*net.TCPConn).SetReadBuffer(4096)
	// PING without ever reading the PONGs: the output passes MaxPending,
	// parsing stops, the unparsed input fills up, and the connection is
	// closed instead of the server buffering without bound.
	chunk := strings.Repeat("PING\r\n", 10000)
	closed := false
	deadline := time.Now().Add(30 * time.Second)
	for !closed && time.Now().Before(deadline) {
		_ = w.nc.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := w.nc.Write([]byte(chunk)); err != nil {
			var ne net.Error
			// A timeout only means the server is busy; keep pushing.
			closed = !(errors.As(err, &ne) && ne.Timeout())
		}
	}
	if !closed {
		t.Fatal("a client that never reads was never stopped")
	}
	waitFor(t, 5*time.Second, "connection dropped", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.clients) == 0
	})
}

func TestRunFailures(t *testing.T) {
	dir := t.TempDir()
	s1 := startServer(t, func(o *Options) { o.NoBroker = false; o.DataDir = dir })
	// A topic's open log holds the directory's lock. (With no topic at all
	// the engine does not lock the directory yet: reported to its owner.)
	w := dialInfo(t, s1)
	w.send("CONNECT {\"fibril\":1}\r\nTOPIC CREATE locked\r\n")
	w.expect(`^\+OK$`)
	w.expect(`^\+OK \{`)
	// The same data directory twice, and a taken port: Run says why.
	cases := []func(*Options){
		func(o *Options) { o.NoBroker = false; o.DataDir = dir },
		func(o *Options) { o.Listen = s1.Addr().String() },
	}
	for i, mutate := range cases {
		s, err := New(testOptions(t, mutate))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		if err := s.Run(ctx); err == nil {
			t.Errorf("case %d: Run succeeded", i)
		}
		cancel()
	}
	if _, err := New(testOptions(t, func(o *Options) { o.MaxPayload = 0 })); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("invalid options: %v", err)
	}
}

// A max payload close to the segment size let clients send messages the
// engine then refused with ErrTooLarge (answered max_payload, formerly
// "internal": TestPublishTooLargeForSegmentIsMaxPayload), or dropped as dead
// letters. Such a setting is now refused up front.
func TestMaxPayloadMustFitASegment(t *testing.T) {
	for _, c := range []struct {
		seg     int64
		payload int
		ok      bool
	}{
		{0, 1 << 20, true},
		{0, 64 << 20, false},
		{8 << 20, 7 << 20, true},
		{8 << 20, 8<<20 - 1024, false},
	} {
		_, err := New(testOptions(t, func(o *Options) {
			o.NoBroker = false
			o.Engine.SegmentSize = c.seg
			o.MaxPayload = c.payload
			o.MaxInputBuffer = c.payload + 2*o.MaxControlLine
		}))
		if got := err == nil; got != c.ok || (err != nil && !errors.Is(err, ErrInvalidOptions)) {
			t.Errorf("segment %d, max payload %d: err %v, want ok=%v", c.seg, c.payload, err, c.ok)
		}
	}
}

// TestInvalidUTF8SubjectRefusedAtTheDoor: PUB pay.\xff used to be confirmed
// and auto-create a topic whose name did not survive a restart.
func TestInvalidUTF8SubjectRefusedAtTheDoor(t *testing.T) {
	s := startServer(t, func(o *Options) { o.NoBroker = false; o.AutoCreate = []string{">"} })
	w := dialInfo(t, s)
	w.send("CONNECT {\"fibril\":1}\r\n")
	w.expect(`^\+OK$`)
	w.send("PUB pay.\xff 1\r\nx\r\nPUB pay.\xfe 1\r\nx\r\nSUB pay.\xff 1\r\nTOPIC CREATE pay.\xfe\r\nPUB caf\xc3\xa9 1\r\nx\r\n")
	for range 4 {
		w.expect(`^-ERR 'invalid_subject `)
	}
	w.expect(`^\+OK 0:1$`)
	if _, ok := s.durable.b.Topic("pay.\xff"); ok {
		t.Fatal("topic pay.\\xff was created")
	}
}

// TestInfoConnectURLs: INFO lists Options.ConnectURLs (SPEC.md 11.1) and
// omits the field on a node that names none; a bad entry or more than 64
// are refused at New.
func TestInfoConnectURLs(t *testing.T) {
	urls := []string{"127.0.0.1:4301", "127.0.0.1:4302"}
	s := startServer(t, func(o *Options) { o.ConnectURLs = urls })
	w := dial(t, s.Addr().String())
	l := w.expect(`^INFO `)
	info, err := protocol.ParseInfo([]byte(strings.TrimPrefix(l, "INFO ")))
	if err != nil {
		t.Fatalf("INFO json: %v", err)
	}
	if fmt.Sprint(info.ConnectURLs) != fmt.Sprint(urls) {
		t.Fatalf("connect_urls %v, want %v", info.ConnectURLs, urls)
	}
	plain := dial(t, startServer(t, nil).Addr().String()).expect(`^INFO `)
	if strings.Contains(plain, "connect_urls") {
		t.Fatalf("INFO of a single node names connect_urls: %s", plain)
	}
	many := make([]string, maxConnectURLs+1)
	for i := range many {
		many[i] = fmt.Sprintf("127.0.0.1:%d", 5000+i)
	}
	for _, bad := range [][]string{{"nohostport"}, many} {
		if _, err := New(testOptions(t, func(o *Options) { o.ConnectURLs = bad })); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("ConnectURLs %d entries (%.20q...): err %v, want ErrInvalidOptions", len(bad), bad[0], err)
		}
	}
}
