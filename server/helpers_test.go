package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/testrun"
)

// testOptions are small, fast limits for tests; mutate adjusts them.
func testOptions(t testing.TB, mutate func(*Options)) Options {
	t.Helper()
	o := DefaultOptions()
	o.Listen = "127.0.0.1:0"
	o.DataDir = t.TempDir()
	o.NoBroker = true
	o.EventLoops = 2
	o.ShutdownTimeout = 2 * time.Second
	o.Logger = testrun.Logger(t)
	if mutate != nil {
		mutate(&o)
	}
	return o
}

// startServer runs a server on 127.0.0.1:0 until the test ends
// (testrun.Serve, the helper internal/testserver uses too).
func startServer(t testing.TB, mutate func(*Options)) *Server {
	t.Helper()
	s, err := New(testOptions(t, mutate))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	testrun.Serve(t, s)
	return s
}

// wireConn is a raw protocol connection with send/expect helpers.
type wireConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dial(t *testing.T, addr string) *wireConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	return &wireConn{t: t, nc: nc, r: bufio.NewReaderSize(nc, 1<<16)}
}

// dialInfo dials s and consumes the INFO line.
func dialInfo(t *testing.T, s *Server) *wireConn {
	t.Helper()
	w := dial(t, s.Addr().String())
	w.expect(`^INFO \{.*\}$`)
	return w
}

func (w *wireConn) send(s string) {
	w.t.Helper()
	_ = w.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(w.nc, s); err != nil {
		w.t.Fatalf("send: %v", err)
	}
}

// line reads one line (without CRLF) within 5 seconds.
func (w *wireConn) line() (string, error) {
	_ = w.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	l, err := w.r.ReadString('\n')
	return strings.TrimRight(l, "\r\n"), err
}

// expect reads one line and fails unless it matches the regexp re.
func (w *wireConn) expect(re string) string {
	w.t.Helper()
	l, err := w.line()
	if err != nil {
		w.t.Fatalf("expect %q: read: %v (got %q)", re, err, l)
	}
	if !regexp.MustCompile(re).MatchString(l) {
		w.t.Fatalf("expect %q: got %q", re, l)
	}
	return l
}

// expectBody reads n bytes and the CRLF after them.
func (w *wireConn) expectBody(want string) {
	w.t.Helper()
	buf := make([]byte, len(want)+2)
	_ = w.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(w.r, buf); err != nil {
		w.t.Fatalf("body: %v", err)
	}
	if string(buf) != want+"\r\n" {
		w.t.Fatalf("body: got %q want %q", buf, want+"\r\n")
	}
}

// expectClosed reads until EOF (skipping lines matching skip) and fails if
// the connection stays open for 5 seconds.
func (w *wireConn) expectClosed() {
	w.t.Helper()
	for {
		_, err := w.line()
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			w.t.Fatal("connection still open after 5s")
		}
		return
	}
}

// waitFor polls cond until it holds or the deadline passes
// (testrun.WaitFor).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testrun.WaitFor(t, d, what, cond)
}
