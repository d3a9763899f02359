package broker

import (
	"runtime"
	"sync/atomic"
)

// mailbox is how the rest of the broker reaches a partition actor: the
// bounded command ring, the unbounded control stack, the waker that parks
// and wakes the actor, and the close protocol (closed is set, no producer
// is left between its closed check and its push, then quit closes). Any
// goroutine may push; only the actor takes and parks.
type mailbox struct {
	q       *ring // cmdQueue; concrete so commands pushed by pointer stay on the stack
	ctl     ctlStack
	wk      *waker
	room    signal        // ring room, for blocked sync callers
	quit    chan struct{} // closed by close: the actor finishes and stops
	done    chan struct{} // closed by the actor once it has stopped
	pushing atomic.Int64  // producers between their closed check and their push
	closed  atomic.Bool
}

// push hands a command to the actor without blocking: ErrClosed once the
// mailbox is closing, ErrQueueFull when the ring is full.
func (m *mailbox) push(c *command) error {
	m.pushing.Add(1)
	defer m.pushing.Add(-1)
	if m.closed.Load() {
		return ErrClosed
	}
	if !m.q.push(c) {
		return ErrQueueFull
	}
	m.wk.wake()
	return nil
}

// control runs fn on the actor. It never fails; fn is dropped if the actor
// has stopped (and then it must not matter).
func (m *mailbox) control(fn func(p *partition)) {
	m.ctl.push(fn)
	m.wk.wake()
}

// controlChecked is control for callers that wait for fn: it fails with
// ErrClosed instead of dropping fn when the actor is stopping.
func (m *mailbox) controlChecked(fn func(p *partition)) error {
	m.pushing.Add(1)
	defer m.pushing.Add(-1)
	if m.closed.Load() {
		return ErrClosed
	}
	m.control(fn)
	return nil
}

// take (actor) appends what has arrived to cmds (at most max commands)
// and to ctls (every control closure, oldest first).
func (m *mailbox) take(cmds []command, max int, ctls []func(*partition)) ([]command, []func(*partition)) {
	return m.q.drain(cmds, max), m.ctl.takeAll(ctls)
}

// roomMade (actor, after a round took commands) wakes the callers blocked
// on a full ring.
func (m *mailbox) roomMade() {
	if m.room.waiting() {
		m.room.broadcast()
	}
}

// park (actor) blocks until something arrives or the mailbox closes; it
// returns at once when something arrived meanwhile, and reports whether
// the mailbox closed.
func (m *mailbox) park() (quit bool) {
	m.wk.sleeping.Store(true)
	if !m.q.empty() || !m.ctl.empty() {
		m.wk.sleeping.Store(false)
		return false
	}
	select {
	case <-m.wk.ch:
	case <-m.quit:
		quit = true
	}
	m.wk.sleeping.Store(false)
	return quit
}

// close ends intake: pushes fail from now on, and the actor learns to stop
// (park) once no producer is between its closed check and its push.
func (m *mailbox) close() {
	m.closed.Store(true)
	for m.pushing.Load() != 0 {
		runtime.Gosched() // a producer is between its closed check and its push
	}
	close(m.quit)
}
