package server

import (
	"runtime"
	"testing"
)

// TestDefaultEventLoops: half the scheduler slots, at least one, so idle
// loops (each holding a P in epoll_wait) leave the other half to the engine.
func TestDefaultEventLoops(t *testing.T) {
	for _, tc := range []struct{ procs, want int }{
		{1, 1}, {2, 1}, {3, 1}, {4, 2}, {16, 8},
	} {
		if got := defaultEventLoops(tc.procs); got != tc.want {
			t.Errorf("defaultEventLoops(%d) = %d, want %d", tc.procs, got, tc.want)
		}
	}
	if got, want := DefaultOptions().EventLoops, defaultEventLoops(runtime.GOMAXPROCS(0)); got != want {
		t.Errorf("DefaultOptions().EventLoops = %d, want %d", got, want)
	}
}
