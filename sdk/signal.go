package fibril

import "sync"

// signal is a request's "done": it fires once, and its channel is made only
// for a caller that asks for it before then. Most futures of a pipelined
// publisher are looked at only after their confirm came, so they never need
// a channel (one allocation, and a close, per publish). mu is a leaf lock:
// nothing else is locked while it is held.
type signal struct {
	mu    sync.Mutex
	fired bool
	ch    chan struct{} // made by wait before the signal fires
}

// closedChan is what wait returns once the signal has fired without a
// channel. It is closed at start-up and never changes.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// wait returns a channel that is closed when the signal fires.
func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		if s.fired {
			return closedChan
		}
		s.ch = make(chan struct{})
	}
	return s.ch
}

// isFired reports whether fire was called; what was written before fire
// is visible after it reports true.
func (s *signal) isFired() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fired
}

// fire marks the signal fired and wakes its waiters. Call it once.
func (s *signal) fire() {
	s.mu.Lock()
	s.fired = true
	if s.ch != nil {
		close(s.ch)
	}
	s.mu.Unlock()
}
