package fibril

import (
	"context"
	"errors"
	"sync"
)

// errWindowClosed is what take returns when the Conn closed while it waited.
var errWindowClosed = errors.New("fibril: closed while waiting for the publish window")

// window is the unconfirmed-publish window: a counting semaphore of size
// tokens, one held by each publish from PublishAsync until its confirm. A
// group commit confirms up to a whole window in one read, and the read
// loop gives those tokens back in one release: a publisher blocked on a
// full window is woken once per read, not once per confirm (as a channel
// of tokens did). mu is a leaf lock.
type window struct {
	size    int
	mu      sync.Mutex
	free    int           // tokens nobody holds
	waiters int           // takers blocked in take
	wake    chan struct{} // capacity 1: a release (or a taker leaving tokens) for a blocked taker
}

func newWindow(size int) *window {
	return &window{size: size, free: size, wake: make(chan struct{}, 1)}
}

// take takes one token, blocking while none is free until ctx is done (it
// returns ctx.Err()) or closed is closed (it returns errWindowClosed).
func (w *window) take(ctx context.Context, closed <-chan struct{}) error {
	for {
		w.mu.Lock()
		if w.free > 0 {
			w.free--
			// more tokens and more takers: pass the wake-up on, since a
			// release wakes one taker however many tokens it gave back
			more := w.free > 0 && w.waiters > 0
			w.mu.Unlock()
			if more {
				w.signal()
			}
			return nil
		}
		w.waiters++
		w.mu.Unlock()
		var err error
		select {
		case <-w.wake:
		case <-ctx.Done():
			err = ctx.Err()
		case <-closed:
			err = errWindowClosed
		}
		w.mu.Lock()
		w.waiters--
		more := err != nil && w.free > 0 && w.waiters > 0
		w.mu.Unlock()
		if more {
			w.signal() // leaving: a wake-up this taker took belongs to the others
		}
		if err != nil {
			return err
		}
	}
}

// release gives back n tokens and wakes a blocked taker, if any.
func (w *window) release(n int) {
	if n <= 0 {
		return
	}
	w.mu.Lock()
	w.free += n
	wake := w.waiters > 0
	w.mu.Unlock()
	if wake {
		w.signal()
	}
}

// held returns how many tokens are taken.
func (w *window) held() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.size - w.free
}

func (w *window) signal() {
	select {
	case w.wake <- struct{}{}:
	default: // one is pending already: it wakes a taker, who passes it on
	}
}
