package server

import (
	"testing"
	"time"
)

// TestLivenessDue steps one connection's heartbeat alone: silent for the
// interval it is PINGed, each PING restarts the interval, after maxOut
// unanswered PINGs it is stale, and any input answers them all.
func TestLivenessDue(t *testing.T) {
	const iv = 10 * time.Second
	s := int64(time.Second)
	var l liveness
	l.lastIn.Store(0)
	steps := []struct {
		at    int64 // now, in seconds
		input bool  // input arrives at this time instead of a tick
		want  pingAction
		out   int32 // PINGs outstanding after the step
	}{
		{at: 5, want: pingNone},
		{at: 10, want: pingSend, out: 1},
		{at: 15, want: pingNone, out: 1}, // the PING restarted the interval
		{at: 20, want: pingSend, out: 2},
		{at: 30, want: pingStale, out: 2}, // maxOut 2 unanswered
		{at: 31, input: true},             // a PONG (or anything) answers both
		{at: 40, want: pingNone},
		{at: 41, want: pingSend, out: 1},
	}
	for _, st := range steps {
		if st.input {
			l.sawInput(st.at * s)
		} else if got := l.due(st.at*s, iv, 2); got != st.want {
			t.Errorf("at %ds: due = %d, want %d", st.at, got, st.want)
		}
		if got := l.pingsOut.Load(); got != st.out {
			t.Errorf("at %ds: %d PINGs out, want %d", st.at, got, st.out)
		}
	}
}

// TestAuthClockRuns: the auth timeout ends a connection waiting for
// CONNECT or whose check is still queued, never one being checked, ready
// or closing.
func TestAuthClockRuns(t *testing.T) {
	for st := stateAwaitConnect; st <= stateClosed; st++ {
		want := st == stateAwaitConnect || st == stateAuthQueued
		if got := st.authClockRuns(); got != want {
			t.Errorf("%v: authClockRuns = %v, want %v", st, got, want)
		}
	}
}
