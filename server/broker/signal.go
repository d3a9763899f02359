package broker

import (
	"context"
	"sync/atomic"
	"time"
)

// signal lets goroutines wait for "something changed" (room in a ring, room
// in a topic) without a mutex: a waiter registers, re-checks its condition,
// then waits on the current channel; broadcast swaps in a new channel and
// closes the old one, only when someone waits.
type signal struct {
	waiters atomic.Int32
	ch      atomic.Pointer[chan struct{}]
}

func (s *signal) current() chan struct{} {
	for {
		if c := s.ch.Load(); c != nil {
			return *c
		}
		c := make(chan struct{})
		if s.ch.CompareAndSwap(nil, &c) {
			return c
		}
	}
}

func (s *signal) waiting() bool { return s.waiters.Load() > 0 }

func (s *signal) broadcast() {
	c := make(chan struct{})
	if old := s.ch.Swap(&c); old != nil {
		close(*old)
	}
}

// waitUntil blocks until ok() holds or ctx ends. ok is re-checked after
// every broadcast and, as a safety net, every 50ms.
func (s *signal) waitUntil(ctx context.Context, ok func() bool) error {
	s.waiters.Add(1)
	defer s.waiters.Add(-1)
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	for {
		c := s.current()
		if ok() {
			return nil
		}
		select {
		case <-c:
		case <-t.C:
			t.Reset(50 * time.Millisecond)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func durationNs(ns int64) time.Duration { return time.Duration(ns) }
