package server

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestConnStateTransitions lists every legal move of a connection's life;
// every pair not listed must be refused by lifecycle.to, leaving the state
// as it was.
func TestConnStateTransitions(t *testing.T) {
	const (
		aw = stateAwaitConnect
		aq = stateAuthQueued
		ac = stateAuthChecking
		ak = stateAuthChecked
		rd = stateReady
		cg = stateClosing
		rl = stateReleased
		cd = stateClosed
	)
	legal := map[[2]connState]bool{
		{aw, aq}: true, {aw, rd}: true, {aq, ac}: true, {aq, ak}: true, {ac, ak}: true, {ak, rd}: true,
		{aw, cg}: true, {aq, cg}: true, {ac, cg}: true, {ak, cg}: true, {rd, cg}: true,
		{aw, rl}: true, {aq, rl}: true, {ac, rl}: true, {ak, rl}: true, {rd, rl}: true, {cg, rl}: true,
		{aw, cd}: true, {aq, cd}: true, {ac, cd}: true, {ak, cd}: true, {rd, cd}: true, {cg, cd}: true, {rl, cd}: true,
	}
	for from := aw; from <= cd; from++ {
		for to := aw; to <= cd; to++ {
			want := legal[[2]connState{from, to}]
			var l lifecycle
			l.v.Store(uint32(from))
			prev, ok := l.to(to)
			if ok != want || prev != from {
				t.Errorf("%v -> %v: to = (%v, %v), want (%v, %v)", from, to, prev, ok, from, want)
			}
			if got := l.load(); ok && got != to || !ok && got != from {
				t.Errorf("%v -> %v (ok %v): state now %v", from, to, ok, got)
			}
		}
	}
	if s := connState(42).String(); s != "state(42)" {
		t.Errorf("String of an unknown state = %q", s)
	}
}

// TestConnStateRaces: the heartbeat, the check queue, the input goroutine
// and closers move one state from different goroutines. Exactly one of
// many closers enters closing, and a password check that finishes after
// the connection closed cannot make it ready again.
func TestConnStateRaces(t *testing.T) {
	for range 200 {
		var l lifecycle
		l.to(stateAuthQueued)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, ok := l.to(stateClosing); ok {
					wins.Add(1)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.to(stateAuthChecking)
			l.to(stateAuthChecked)
			l.to(stateReady)
		}()
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d closers entered closing, want 1", wins.Load())
		}
		if st := l.load(); st != stateClosing {
			t.Fatalf("state after the race = %v, want closing", st)
		}
	}
}

// TestTeardownReleasesOnce drives the closing side on a connection with a
// plain subscription: teardown alone (the socket went away) gives the
// subscription back and forgets the connection; release first (a
// lingering close) gives it back at once, and the teardown that follows
// only forgets; a second teardown does nothing.
func TestTeardownReleasesOnce(t *testing.T) {
	for _, linger := range []bool{false, true} {
		s, err := New(testOptions(t, nil))
		if err != nil {
			t.Fatal(err)
		}
		c, refuse := s.admit(&nullTransport{})
		if c == nil {
			t.Fatalf("admit: %q", refuse)
		}
		c.feed([]byte("CONNECT {}\r\nSUB a.b 1\r\n"))
		if n := len(s.subs.match("a.b", nil)); n != 1 {
			t.Fatalf("linger %v: %d subscriptions match, want 1", linger, n)
		}
		if linger {
			c.closeWith("test", nil)
			c.release()
			if n := len(s.subs.match("a.b", nil)); n != 0 || c.state.load() != stateReleased {
				t.Fatalf("after release: %d subscriptions, state %v", n, c.state.load())
			}
			if _, ok := s.clients[c.id]; !ok {
				t.Fatal("released connection forgotten before its teardown")
			}
		}
		c.teardown()
		c.teardown()
		if n := len(s.subs.match("a.b", nil)); n != 0 || c.state.load() != stateClosed {
			t.Fatalf("linger %v: after teardown %d subscriptions, state %v", linger, n, c.state.load())
		}
		if _, ok := s.clients[c.id]; ok {
			t.Fatalf("linger %v: torn-down connection still listed", linger)
		}
		if _, ok := s.closed.get(c.id); !ok {
			t.Fatalf("linger %v: no record of the closed connection", linger)
		}
	}
}
