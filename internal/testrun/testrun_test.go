package testrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fatalTB records Fatalf instead of stopping the goroutine.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, 5*time.Second, "three polls", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
	f := &fatalTB{TB: t}
	start := time.Now()
	WaitFor(f, 30*time.Millisecond, "never", func() bool { return false })
	if !strings.Contains(f.msg, "waiting for never") || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("WaitFor on a false condition: %q after %s", f.msg, time.Since(start))
	}
}

func TestLeakedGoroutines(t *testing.T) {
	stop := make(chan struct{})
	go func() { <-stop }()
	if got := LeakedGoroutines(10*time.Millisecond, "testrun.TestLeakedGoroutines"); !strings.Contains(got, "TestLeakedGoroutines.func1") {
		t.Fatalf("a blocked goroutine was not reported: %q", got)
	}
	close(stop)
	if got := LeakedGoroutines(5*time.Second, "testrun.TestLeakedGoroutines"); got != "" {
		t.Fatalf("an ended goroutine was reported: %q", got)
	}
}

// fakeRunner is a Runner that is ready at once and returns err when stopped.
type fakeRunner struct {
	ready chan struct{}
	err   error
}

func (r *fakeRunner) Ready() <-chan struct{} { return r.ready }

func (r *fakeRunner) Run(ctx context.Context) error {
	close(r.ready)
	<-ctx.Done()
	return r.err
}

// errTB records Errorf and Fatalf instead of failing.
type errTB struct {
	testing.TB
	cleanups []func()
	msg      string
}

func (e *errTB) Helper()                           {}
func (e *errTB) Cleanup(f func())                  { e.cleanups = append(e.cleanups, f) }
func (e *errTB) Errorf(format string, args ...any) { e.msg = fmt.Sprintf(format, args...) }

func TestServeStopsTheRunnerAtCleanup(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{{nil, ""}, {errors.New("boom"), "Run returned boom"}} {
		tb := &errTB{TB: t}
		r := &fakeRunner{ready: make(chan struct{}), err: tc.err}
		Serve(tb, r)
		if len(tb.cleanups) != 1 {
			t.Fatalf("%d cleanups registered, want 1", len(tb.cleanups))
		}
		tb.cleanups[0]()
		if !strings.Contains(tb.msg, tc.want) || (tc.want == "") != (tb.msg == "") {
			t.Errorf("Run returning %v: reported %q, want %q", tc.err, tb.msg, tc.want)
		}
	}
}
