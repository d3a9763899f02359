package forward

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// peer is a protocol peer on loopback: it sends INFO, answers the
// handshake's PING, then answers each command line with what answer
// returns (nil: nothing, the command waits).
type peer struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	answer func(cmd string) string
}

func newPeer(t *testing.T, answer func(cmd string) string) *peer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{ln: ln, answer: answer}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, nc)
			p.mu.Unlock()
			go p.serve(nc)
		}
	}()
	return p
}

func (p *peer) serve(nc net.Conn) {
	r := bufio.NewReader(nc)
	fmt.Fprint(nc, "INFO {\"fibril\":1}\r\n")
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return
		}
		l = strings.TrimRight(l, "\r\n")
		switch {
		case strings.HasPrefix(l, "CONNECT "):
			if !strings.Contains(l, `"fibril_forward":"tok"`) {
				fmt.Fprint(nc, "-ERR 'auth_violation bad credentials'\r\n")
				nc.Close()
				return
			}
		case l == "PING":
			fmt.Fprint(nc, "PONG\r\n")
		case strings.HasPrefix(l, "PUB "):
			r.ReadString('\n') // the body
			fmt.Fprint(nc, p.answer(l))
		default:
			fmt.Fprint(nc, p.answer(l))
		}
	}
}

func (p *peer) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

type result struct {
	line string
	msgs []Msg
	err  error
}

func send(pl *Pool, tg Target, cmd string) chan result {
	ch := make(chan result, 1)
	pl.Send(tg, "u", "", []byte(cmd), func(line []byte, msgs []Msg, err error) {
		ch <- result{string(line), msgs, err}
	})
	return ch
}

func wait(t *testing.T, ch chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no answer")
		return result{}
	}
}

// TestAnswersInCommandOrderWithDeliveries: answers go to commands in the
// order they were sent, with the delivery frames before each.
func TestAnswersInCommandOrderWithDeliveries(t *testing.T) {
	p := newPeer(t, func(cmd string) string {
		if strings.HasPrefix(cmd, "POLL") {
			return "MSG a 0 $F.1.1.0.1.1 2\r\nhi\r\nHMSG b 0 $F.1.1.0.2.1 12 14\r\nNATS/1.0\r\n\r\nyo\r\n+OK 2\r\n"
		}
		return "+OK 0:" + strings.Fields(cmd)[1] + "\r\n"
	})
	pl := New(Options{})
	defer pl.Close()
	tg := Target{Node: "n2", Addr: p.ln.Addr().String(), Token: "tok"}
	var chs []chan result
	for i := range 5 {
		chs = append(chs, send(pl, tg, fmt.Sprintf("PUB %d 1\r\nx\r\n", i)))
	}
	poll := send(pl, tg, "POLL t g 2\r\n")
	for i, ch := range chs {
		if r := wait(t, ch); r.err != nil || r.line != fmt.Sprintf("+OK 0:%d", i) {
			t.Fatalf("command %d answered %q, %v", i, r.line, r.err)
		}
	}
	r := wait(t, poll)
	if r.err != nil || r.line != "+OK 2" || len(r.msgs) != 2 {
		t.Fatalf("poll answered %q with %d deliveries, %v", r.line, len(r.msgs), r.err)
	}
	if m := r.msgs[1]; m.Subject != "b" || m.Reply != "$F.1.1.0.2.1" || string(m.Header) != "NATS/1.0\r\n\r\n" || string(m.Data) != "yo" {
		t.Fatalf("second delivery %+v", m)
	}
}

// TestWindowFullIsBusyAndLostConnFailsEveryWaiter: past Window a command
// is refused at once with ErrBusy; when the connection drops, every
// waiting command ends with ErrLost, and the next one dials again.
func TestWindowFullIsBusyAndLostConnFailsEveryWaiter(t *testing.T) {
	var mu sync.Mutex
	hold := true
	p := newPeer(t, func(cmd string) string {
		mu.Lock()
		defer mu.Unlock()
		if hold {
			return ""
		}
		return "+OK\r\n"
	})
	pl := New(Options{Window: 2})
	defer pl.Close()
	tg := Target{Node: "n2", Addr: p.ln.Addr().String(), Token: "tok"}
	a, b := send(pl, tg, "ACK x\r\n"), send(pl, tg, "ACK y\r\n")
	if r := wait(t, send(pl, tg, "ACK z\r\n")); !errors.Is(r.err, ErrBusy) {
		t.Fatalf("third command: %v, want ErrBusy", r.err)
	}
	// The first two are written once dialled; cut the link under them.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		n := len(p.conns)
		p.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(50 * time.Millisecond)
	p.cut()
	for _, ch := range []chan result{a, b} {
		if r := wait(t, ch); !errors.Is(r.err, ErrLost) {
			t.Fatalf("waiting command after the cut: %v, want ErrLost", r.err)
		}
	}
	mu.Lock()
	hold = false
	mu.Unlock()
	if r := wait(t, send(pl, tg, "ACK w\r\n")); r.err != nil || r.line != "+OK" {
		t.Fatalf("after a redial: %q, %v", r.line, r.err)
	}
}

// TestRefusedTokenAndOversizeAnswer: a target refusing the token fails
// the command (ErrLost, the handshake's reason); an answer whose
// deliveries pass MaxAnswer cuts the connection rather than buffer it.
func TestRefusedTokenAndOversizeAnswer(t *testing.T) {
	p := newPeer(t, func(string) string {
		return "MSG a 0 h 100\r\n" + strings.Repeat("x", 100) + "\r\n+OK 1\r\n"
	})
	pl := New(Options{MaxAnswer: 50})
	defer pl.Close()
	bad := Target{Node: "n2", Addr: p.ln.Addr().String(), Token: "wrong"}
	if r := wait(t, send(pl, bad, "ACK x\r\n")); !errors.Is(r.err, ErrLost) || !strings.Contains(r.err.Error(), "auth_violation") {
		t.Fatalf("wrong token: %v", r.err)
	}
	good := Target{Node: "n2", Addr: p.ln.Addr().String(), Token: "tok"}
	if r := wait(t, send(pl, good, "POLL t g 1\r\n")); !errors.Is(r.err, ErrLost) {
		t.Fatalf("oversize answer: %q %v, want ErrLost", r.line, r.err)
	}
}

// TestFrameTable: delivery lines the reader takes and refuses.
func TestFrameTable(t *testing.T) {
	c := &conn{p: New(Options{MaxAnswer: 1 << 10})}
	for _, tc := range []struct {
		line, body string
		ok         bool
	}{
		{"MSG s 0 h 2", "hi\r\n", true},
		{"HMSG s 0 h 3 5", "abcde\r\n", true},
		{"MSG s i1 2", "hi\r\n", true}, // no reply subject
		{"HMSG s i1 3 5", "abcde\r\n", true},
		{"MSG s", "", false},
		{"HMSG s 0 h 6 5", "abcde\r\n", false},
		{"MSG s 0 h 2", "hix\n", false},
		{"MSG s 0 h 99999", "", false},
		{"MSG s 0 h -1", "", false},
	} {
		_, err := c.frame(bufio.NewReader(strings.NewReader(tc.body)), []byte(tc.line))
		if (err == nil) != tc.ok {
			t.Errorf("%q + %q: err %v, want ok %v", tc.line, tc.body, err, tc.ok)
		}
	}
}

// TestCloseTagEndsOnlyThoseConns: CloseTag fails the tagged
// connection's waiting commands (ErrLost) and reports nothing; the
// shared connection goes on.
func TestCloseTagEndsOnlyThoseConns(t *testing.T) {
	p := newPeer(t, func(cmd string) string {
		if strings.HasPrefix(cmd, "POLL") {
			return "" // a waiting POLL
		}
		return "+OK\r\n"
	})
	var logged []string
	var mu sync.Mutex
	pl := New(Options{Logf: func(f string, a ...any) { mu.Lock(); logged = append(logged, fmt.Sprintf(f, a...)); mu.Unlock() }})
	defer pl.Close()
	tg := Target{Node: "n2", Addr: p.ln.Addr().String(), Token: "tok"}
	ch := make(chan result, 1)
	pl.Send(tg, "u", "c7", []byte("POLL t g 1 5000\r\n"), func(line []byte, msgs []Msg, err error) { ch <- result{string(line), msgs, err} })
	if r := wait(t, send(pl, tg, "ACK x\r\n")); r.err != nil {
		t.Fatal(r.err)
	}
	pl.CloseTag("c7")
	if r := wait(t, ch); !errors.Is(r.err, ErrLost) {
		t.Fatalf("the tagged POLL: %v, want ErrLost", r.err)
	}
	if r := wait(t, send(pl, tg, "ACK y\r\n")); r.err != nil || r.line != "+OK" {
		t.Fatalf("shared connection after CloseTag: %q %v", r.line, r.err)
	}
	time.Sleep(20 * time.Millisecond) // the closed conn's reader ends
	mu.Lock()
	defer mu.Unlock()
	if len(logged) != 0 {
		t.Fatalf("CloseTag reported %q", logged)
	}
}
