// Package testserver starts in-process Fibril servers for Go tests: a real
// server.Server on 127.0.0.1 port 0 with its data in the test's temporary
// directory, ready when Start returns and stopped (waiting for Run to
// return) when the test ends. It also holds the two helpers every such test
// needs: WaitFor, which polls a condition with a deadline instead of
// sleeping, and LeakedGoroutines, which a TestMain uses to fail the run
// when servers or clients outlive the tests.
//
// It is test support only: it must never be imported by non-test code (it
// calls testing.TB's Fatal and Cleanup and chooses small limits that suit
// tests, not production). Tests of package server itself cannot import it
// (it imports server); tests that need the real binary (signals, crashes,
// the command line) use conformance/fibrilproc instead.
package testserver

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server"
	"github.com/fibrilmq/fibril/server/broker"
)

// Option adjusts the server.Options Start uses, after its defaults.
type Option func(*server.Options)

// WithoutBroker turns the durable engine off: plain NATS semantics only.
func WithoutBroker() Option { return func(o *server.Options) { o.NoBroker = true } }

// WithStore makes the engine keep its logs through open (for example
// memstore.Stores.Open) instead of the file-backed segment log.
func WithStore(open broker.StoreOpener) Option {
	return func(o *server.Options) { o.Engine.OpenStore = open }
}

// WithOptions applies mutate to the options, for anything the named
// options do not cover.
func WithOptions(mutate func(*server.Options)) Option { return Option(mutate) }

// Options returns the options Start would use: server.DefaultOptions with
// Listen "127.0.0.1:0", DataDir a fresh t.TempDir(), one event loop, a 2 s
// shutdown timeout and logs discarded (sent to t.Log at debug level with
// go test -v), then opts applied in order.
func Options(t testing.TB, opts ...Option) server.Options {
	t.Helper()
	o := server.DefaultOptions()
	o.Listen = "127.0.0.1:0"
	o.DataDir = t.TempDir()
	o.EventLoops = 1
	o.ShutdownTimeout = 2 * time.Second
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	for _, f := range opts {
		f(&o)
	}
	return o
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Start runs a server built from Options(t, opts...) until the test ends
// and returns it once it accepts connections (s.Addr() is its address). It
// fails the test if the server does not start within 10 s, and, at cleanup,
// if Run returns an error or does not return within 15 s.
func Start(t testing.TB, opts ...Option) *server.Server {
	t.Helper()
	s, err := server.New(Options(t, opts...))
	if err != nil {
		t.Fatalf("testserver: server.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-s.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("testserver: Run: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		<-done
		t.Fatal("testserver: server not ready in 10s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("testserver: Run returned %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("testserver: server did not stop in 15s")
		}
	})
	return s
}

// Addr is Start returning only the server's address ("127.0.0.1:port").
func Addr(t testing.TB, opts ...Option) string {
	t.Helper()
	return Start(t, opts...).Addr().String()
}

// WaitFor polls cond until it holds, and fails the test (naming what) if it
// still does not after d. The pause between polls starts at 1 ms and
// doubles up to 50 ms, so a quick condition is seen at once and an
// expensive one (a process per poll) does not hog the CPU.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
			return
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// LeakedGoroutines waits up to d for every goroutine whose stack mentions
// one of pkgs (import path prefixes such as "github.com/fibrilmq/fibril/")
// to end, and returns the stacks of those still running ("" when none).
// Call it from TestMain after m.Run.
func LeakedGoroutines(d time.Duration, pkgs ...string) string {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 1<<20)
		for {
			n := runtime.Stack(buf, true)
			if n < len(buf) {
				buf = buf[:n]
				break
			}
			buf = make([]byte, 2*len(buf))
		}
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "testserver.LeakedGoroutines") {
				continue
			}
			for _, p := range pkgs {
				if strings.Contains(g, p) {
					leaked = append(leaked, g)
					break
				}
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
