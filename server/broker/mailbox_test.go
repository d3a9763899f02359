package broker

import (
	"errors"
	"testing"
)

func testMailbox(size int) *mailbox {
	return &mailbox{q: newRing(size), wk: newWaker(), quit: make(chan struct{}), done: make(chan struct{})}
}

// TestMailbox: commands are bounded (ErrQueueFull at the bound) and taken
// in order up to max, control closures are unbounded and taken oldest
// first, park returns at once while something is queued and blocks until
// a push wakes it, and after close pushes fail, checked controls fail and
// park reports quit.
func TestMailbox(t *testing.T) {
	m := testMailbox(8)
	n := 0
	for ; n < 100; n++ {
		c := command{kind: cmdPublish, subject: string(rune('a' + n))}
		if err := m.push(&c); err != nil {
			if !errors.Is(err, ErrQueueFull) {
				t.Fatal(err)
			}
			break
		}
	}
	if n < 8 || n == 100 {
		t.Fatalf("a ring of 8 took %d commands", n)
	}
	var order []int
	for i := range 3 {
		m.control(func(*partition) { order = append(order, i) })
	}
	if m.park() {
		t.Fatal("park reported quit")
	}
	cmds, ctls := m.take(nil, 5, nil)
	if len(cmds) != 5 || cmds[0].subject != "a" || cmds[4].subject != "e" || len(ctls) != 3 {
		t.Fatalf("took %d commands (first %q), %d closures", len(cmds), cmds[0].subject, len(ctls))
	}
	for _, fn := range ctls {
		fn(nil)
	}
	if len(order) != 3 || order[0] != 0 || order[2] != 2 {
		t.Fatalf("closures ran in order %v, want oldest first", order)
	}
	cmds, _ = m.take(cmds[:0], 100, nil)
	if len(cmds) != n-5 {
		t.Fatalf("took %d more, want the %d left", len(cmds), n-5)
	}

	woke := make(chan bool)
	go func() { woke <- m.park() }()
	c := command{kind: cmdSettle}
	// the push may land before park looks (then park returns at once)
	if err := m.push(&c); err != nil {
		t.Fatal(err)
	}
	if quit := <-woke; quit {
		t.Fatal("a push woke park with quit")
	}
	m.take(nil, 100, nil)

	m.close()
	if err := m.push(&c); !errors.Is(err, ErrClosed) {
		t.Fatalf("push after close: %v", err)
	}
	if err := m.controlChecked(func(*partition) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("controlChecked after close: %v", err)
	}
	if !m.park() {
		t.Fatal("park after close did not report quit")
	}
}
