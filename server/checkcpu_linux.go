package server

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// checkClock measures the CPU time of password checks (authqueue.go) on
// the calling goroutine's own thread: a check on a busy machine takes
// longer in wall time than it costs, and charging the wall time made the
// budget wait for CPU the checks never used. The worker calling read
// holds its thread (runtime.LockOSThread) for as long as it lives.
type checkClock struct{ locked bool }

// read locks the calling goroutine to its thread (once) and returns the
// thread's CPU time so far; ok is false when the system cannot tell.
func (k *checkClock) read() (time.Duration, bool) {
	if !k.locked {
		runtime.LockOSThread()
		k.locked = true
	}
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
