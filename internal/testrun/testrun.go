// Package testrun runs an in-process server for the length of a Go test,
// and holds the helpers every server test needs: Logger (logs to t.Log
// under go test -v, else nowhere), WaitFor (poll a condition with a
// deadline instead of sleeping) and LeakedGoroutines (for a TestMain that
// fails the run when goroutines outlive the tests).
//
// It is a leaf: it knows nothing of package server, only of something with
// Run and Ready, so that package server's own tests (which cannot import
// internal/testserver, since it imports server) and internal/testserver
// share one implementation. It is test support only and must never be
// imported by non-test code (it calls testing.TB's Fatal and Cleanup).
package testrun

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Runner is a server: Run serves until its context is cancelled and
// returns nil on a clean stop; Ready is closed once it accepts connections.
type Runner interface {
	Run(ctx context.Context) error
	Ready() <-chan struct{}
}

// Serve runs r until the test ends and returns once r is ready. It fails
// the test if r does not become ready within 10 s (or Run returns first),
// and, at cleanup, if Run returns an error or does not return within 15 s.
func Serve(t testing.TB, r Runner) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case <-r.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("testrun: Run: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		<-done
		t.Fatal("testrun: server not ready in 10s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("testrun: Run returned %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("testrun: server did not stop in 15s")
		}
	})
}

// Logger returns a logger that discards everything, or, under go test -v,
// sends every record (debug level and up) to t.Log.
func Logger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
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
			if strings.Contains(g, "testrun.LeakedGoroutines") {
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
