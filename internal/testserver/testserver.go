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
// (it imports server): they use internal/testrun, the leaf this package
// is built on, directly. Tests that need the real binary (signals, crashes,
// the command line) use conformance/fibrilproc instead.
package testserver

import (
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/testrun"
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
	o.Logger = testrun.Logger(t)
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Start runs a server built from Options(t, opts...) until the test ends
// and returns it once it accepts connections (s.Addr() is its address). It
// fails the test if the server does not start within 10 s, and, at cleanup,
// if Run returns an error or does not return within 15 s (testrun.Serve).
func Start(t testing.TB, opts ...Option) *server.Server {
	t.Helper()
	s, err := server.New(Options(t, opts...))
	if err != nil {
		t.Fatalf("testserver: server.New: %v", err)
	}
	testrun.Serve(t, s)
	return s
}

// Addr is Start returning only the server's address ("127.0.0.1:port").
func Addr(t testing.TB, opts ...Option) string {
	t.Helper()
	return Start(t, opts...).Addr().String()
}

// WaitFor is testrun.WaitFor: it polls cond until it holds, and fails the
// test (naming what) if it still does not after d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testrun.WaitFor(t, d, what, cond)
}

// LeakedGoroutines is testrun.LeakedGoroutines: the stacks of goroutines
// mentioning one of pkgs still running after d ("" when none), for a
// TestMain after m.Run.
func LeakedGoroutines(d time.Duration, pkgs ...string) string {
	return testrun.LeakedGoroutines(d, pkgs...)
}
