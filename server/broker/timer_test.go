package broker

import (
	"testing"
	"time"
)

func TestActorTimer(t *testing.T) {
	c := newFakeClock()
	w := newWaker()
	now := c.Now().UnixNano()
	var tm actorTimer
	kicked := func() bool {
		select {
		case <-w.ch:
			return true
		default:
			return false
		}
	}

	tm.arm(c, now, 0, w)
	if tm.at != 0 || tm.stop != nil {
		t.Fatalf("nothing due armed a timer at %d", tm.at)
	}
	tm.arm(c, now, now+int64(time.Second), w)
	tm.arm(c, now, now+int64(2*time.Second), w) // later: kept the earlier one
	if tm.at != now+int64(time.Second) {
		t.Fatalf("at = %d, want the earlier deadline", tm.at-now)
	}
	tm.arm(c, now, now+int64(time.Millisecond), w) // earlier: replaces it
	if tm.at != now+int64(time.Millisecond) {
		t.Fatalf("at = %d, want the replaced deadline", tm.at-now)
	}
	c.Advance(time.Millisecond)
	if !kicked() {
		t.Fatal("the timer fired without kicking the actor")
	}
	c.Advance(time.Second)
	if kicked() {
		t.Fatal("the replaced timer still fired")
	}
	tm.begin()
	if tm.at != 0 {
		t.Fatal("begin kept a fired timer armed")
	}
	now = c.Now().UnixNano()
	tm.arm(c, now, now+int64(time.Second), w) // armed again after it fired
	tm.begin()
	if tm.at == 0 {
		t.Fatal("begin forgot a timer that has not fired")
	}
	tm.halt()
	c.Advance(time.Hour)
	if kicked() {
		t.Fatal("a halted timer fired")
	}
}

func TestEarliest(t *testing.T) {
	for _, c := range []struct{ at, t, want int64 }{
		{0, 0, 0}, {0, 5, 5}, {5, 0, 5}, {5, 3, 3}, {3, 5, 3},
	} {
		if got := earliest(c.at, c.t); got != c.want {
			t.Errorf("earliest(%d, %d) = %d, want %d", c.at, c.t, got, c.want)
		}
	}
}
