package server

import (
	"fmt"
	"hash/crc32"
	"runtime"
	"testing"
)

// TestAppendMsgFrames pins the frames fan-out writes now that appendMsg is
// protocol's encoder rather than a second one: MSG and HMSG, with and
// without reply-to and checksum, and HMSG stripped to MSG for a client
// without headers (its checksum then covers the payload only).
func TestAppendMsgFrames(t *testing.T) {
	hdr := "NATS/1.0\r\nA: b\r\n\r\n"
	body := hdr + "hello"
	sumAll := fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(body)))
	sumPayload := fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte("hello")))
	tests := []struct {
		m           pubMsg
		crc, withHd bool
		want        string
	}{
		{pubMsg{subject: "s", body: []byte("hello")}, false, true, "MSG s 7 5\r\nhello\r\n"},
		{pubMsg{subject: "s", reply: "r", body: []byte("hello")}, false, true, "MSG s 7 r 5\r\nhello\r\n"},
		{pubMsg{subject: "s", body: []byte("hello")}, true, true, "MSG s 7 5 " + sumPayload + "\r\nhello\r\n"},
		{pubMsg{subject: "s", hdrLen: len(hdr), body: []byte(body)}, false, true, fmt.Sprintf("HMSG s 7 %d %d\r\n%s\r\n", len(hdr), len(body), body)},
		{pubMsg{subject: "s", reply: "r", hdrLen: len(hdr), body: []byte(body)}, true, true, fmt.Sprintf("HMSG s 7 r %d %d %s\r\n%s\r\n", len(hdr), len(body), sumAll, body)},
		{pubMsg{subject: "s", hdrLen: len(hdr), body: []byte(body)}, false, false, "MSG s 7 5\r\nhello\r\n"},
		{pubMsg{subject: "s", hdrLen: len(hdr), body: []byte(body)}, true, false, "MSG s 7 5 " + sumPayload + "\r\nhello\r\n"},
		{pubMsg{subject: "s", body: nil}, true, true, "MSG s 7 0 00000000\r\n\r\n"},
	}
	for i, tc := range tests {
		if got := string(appendMsg(nil, &tc.m, "7", tc.crc, tc.withHd)); got != tc.want {
			t.Errorf("%d: appendMsg = %q, want %q", i, got, tc.want)
		}
	}
}

// TestQueueGroupIsAnyToken: SPEC.md 6 says a plain queue group may be any
// token, as nats-server takes it (a queue name is compared as bytes, never
// matched as a subject). validQueue refused `q*`, `*`, `>` and `a..b` as
// invalid_subject (naming the subject, not the queue); each is now one
// queue group whose members share the messages, with the engine off and
// on (the engine's SUB path decides plain or durable on the lane).
func TestQueueGroupIsAnyToken(t *testing.T) {
	for _, engine := range []bool{false, true} {
		t.Run(fmt.Sprintf("engine=%v", engine), func(t *testing.T) {
			var s *Server
			if engine {
				s = startDurable(t, nil)
			} else {
				s = startServer(t, nil)
			}
			for _, q := range []string{"q*", "*", ">", "a..b", ".x", "q.>"} {
				sub := dialInfo(t, s)
				sub.send(`CONNECT {"verbose":true}` + "\r\n")
				sub.expect(`^\+OK$`)
				sub.send("SUB jobs " + q + " 1\r\nSUB jobs " + q + " 2\r\nPING\r\n")
				sub.expect(`^\+OK$`)
				sub.expect(`^\+OK$`)
				sub.expect(`^PONG$`)
				pub := dialInfo(t, s)
				pub.send("CONNECT {}\r\nPUB jobs 1\r\na\r\nPUB jobs 1\r\nb\r\nPUB jobs 1\r\nc\r\nPING\r\n")
				pub.expect(`^PONG$`)
				// Three messages, each to one member only: three MSG lines,
				// then the PONG (nothing was delivered twice).
				sub.send("PING\r\n")
				for i := 0; i < 3; i++ {
					sub.expect(`^MSG jobs [12] 1$`)
					if _, err := sub.line(); err != nil {
						t.Fatalf("queue %q: body: %v", q, err)
					}
				}
				sub.expect(`^PONG$`)
			}
		})
	}
}

// TestPlainPublishAllocs: a plain PUB delivered to one subscriber
// allocates nothing once warm, with and without the durable engine (where
// no topic captures the subject): the subject's string comes from the
// publisher's subject cache, the match from the sublist's cache, and the
// routed message stays on the stack (a closure keeping a pointer to it made
// every publish allocate it).
func TestPlainPublishAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops buffers at random under -race")
	}
	for _, durable := range []bool{false, true} {
		t.Run(map[bool]string{false: "no broker", true: "durable engine"}[durable], func(t *testing.T) {
			s, err := New(testOptions(t, func(o *Options) { o.NoBroker = !durable }))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.openDurable(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.closeDurable)
			sub := newClient(s, 1, &nullTransport{}, false)
			pub := newClient(s, 2, &nullTransport{}, false)
			if n := sub.feed([]byte("SUB bench.x 1\r\n")); n == 0 || len(s.subs.match("bench.x", nil)) != 1 {
				t.Fatal("SUB not registered")
			}
			frame := []byte("PUB bench.x 16\r\n0123456789abcdef\r\n")
			const batch = 64 // publishes between two drains of the subscriber
			per := len("MSG bench.x 1 16\r\n0123456789abcdef\r\n")
			var bufs [][]byte
			var before, after runtime.MemStats
			// Other goroutines (the engine's) may allocate during a round:
			// the fewest of a round's allocations must be none, where one
			// per message would be batch.
			least := uint64(1 << 62)
			for round := range 20 {
				runtime.ReadMemStats(&before)
				for range batch {
					if n := pub.feed(frame); n != len(frame) {
						t.Fatalf("feed consumed %d of %d", n, len(frame))
					}
				}
				runtime.ReadMemStats(&after)
				if round > 0 { // round 0 warms the caches and the pool
					least = min(least, after.Mallocs-before.Mallocs)
				}
				var n int
				bufs, n, _ = sub.takeOut(bufs[:0], 1<<30)
				if n != batch*per {
					t.Fatalf("subscriber got %d bytes, want %d", n, batch*per)
				}
				s.outBufs.putAll(bufs)
			}
			if least != 0 {
				t.Errorf("at least %d allocations per %d publishes, want 0", least, batch)
			}
		})
	}
}

// takingTransport is a transport whose owner takes the outbox the moment
// it is woken, as a subscriber on another event loop may: it counts the
// wakes and the bytes each one took.
type takingTransport struct {
	nullTransport
	c     *client
	taken []int
}

func (tr *takingTransport) wake() {
	bufs, n, _ := tr.c.takeOut(nil, 1<<30)
	tr.c.srv.outBufs.putAll(bufs)
	tr.taken = append(tr.taken, n)
}

// TestDeliveriesWakeOncePerRead: one read of a publisher carrying many PUBs
// wakes a subscriber once, when the read is parsed, with every message in
// its outbox; a subscriber taking its outbox as soon as it is woken was
// woken (and wrote) once per message.
func TestDeliveriesWakeOncePerRead(t *testing.T) {
	s, err := New(testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	tr := &takingTransport{}
	sub := newClient(s, 1, tr, false)
	tr.c = sub
	pub := newClient(s, 2, &nullTransport{}, false)
	sub.feed([]byte("SUB bench.x 1\r\n"))
	tr.taken = nil
	const msgs = 50
	var read []byte
	for range msgs {
		read = append(read, "PUB bench.x 16\r\n0123456789abcdef\r\n"...)
	}
	for round := range 3 {
		if n := pub.feed(read); n != len(read) {
			t.Fatalf("feed consumed %d of %d", n, len(read))
		}
		want := msgs * len("MSG bench.x 1 16\r\n0123456789abcdef\r\n")
		if len(tr.taken) != 1 || tr.taken[0] != want {
			t.Fatalf("round %d: wakes took %v bytes, want one wake taking %d", round, tr.taken, want)
		}
		tr.taken = tr.taken[:0]
	}
}
