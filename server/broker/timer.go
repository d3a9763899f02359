package broker

import "sync/atomic"

// actorTimer is the partition actor's one timer: the earliest moment it
// must wake for (a lease end, a nack delay, a retention pass, a dead-letter
// retry). The actor arms and reads it; only fired is written by the
// clock's goroutine, which then kicks the actor's waker.
type actorTimer struct {
	at    int64       // when the armed timer fires (unix ns; 0: none armed)
	stop  func() bool // cancels the armed timer (nil: none yet)
	fired atomic.Bool // the armed timer has fired since the round began
}

// begin (actor, at the start of a round) forgets a timer that has fired:
// the next arm must set a new one.
func (t *actorTimer) begin() {
	if t.fired.Swap(false) {
		t.at = 0
	}
}

// arm makes sure the timer fires by at (unix ns; 0: nothing is due),
// kicking w then. A timer already due at or before at is kept; a later
// one is replaced.
func (t *actorTimer) arm(c Clock, now, at int64, w *waker) {
	if at == 0 || (t.at != 0 && t.at <= at) {
		return
	}
	if t.stop != nil {
		t.stop()
	}
	t.at = at
	d := at - now
	if d < 0 {
		d = 0
	}
	t.stop = c.AfterFunc(durationNs(d), func() {
		t.fired.Store(true)
		w.kick()
	})
}

// halt cancels the armed timer (shutdown).
func (t *actorTimer) halt() {
	if t.stop != nil {
		t.stop()
	}
}

// earliest returns the earlier of two deadlines, where 0 means none.
func earliest(at, t int64) int64 {
	if t != 0 && (at == 0 || t < at) {
		return t
	}
	return at
}
