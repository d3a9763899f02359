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
