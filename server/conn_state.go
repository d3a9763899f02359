package server

// A connection's life (SPEC.md 3: authentication before anything, the auth
// timeout and auth_busy; 7.8 and 13: a fatal -ERR, then the close) is one
// state, changed only by lifecycle.to, along the arrows of legalNext:
//
//	await_connect → ready                       (no check, or a remembered answer)
//	await_connect → auth_queued → auth_checking → auth_checked → ready
//	auth_queued → auth_checked                  (shed or dropped unchecked)
//	any earlier state → closing → released → closed (each may be skipped)
//
// A connection without authentication starts ready (commands before
// CONNECT are served, as in NATS); with it, it starts await_connect and a
// CONNECT whose password must be checked off the event loop passes through
// the three auth states (authqueue.go). closing, released and closed may be
// reached from any earlier state, skipping those between: closeWith enters
// closing, release enters released (and stops output as closing does), and
// teardown enters closed, running release's work first when it has not
// run.
//
// The state is an atomic so the heartbeat and the check queue can read it
// from their goroutines. The closing side (closing, released, closed) is
// only entered with client.answers.mu and client.mu held, so code holding
// client.mu sees output stop exactly when the queue of answers closes.

import (
	"strconv"
	"sync/atomic"
)

// connState is where a connection is in its life.
type connState uint32

const (
	// stateAwaitConnect: authentication is on and no CONNECT has been
	// accepted; only CONNECT may come, within PreAuthBytes and AuthTimeout.
	stateAwaitConnect connState = iota
	// stateAuthQueued: a CONNECT's password check waits in the check
	// queue; parsing waits. The auth timeout still runs (a flood of
	// CONNECTs must not keep connections alive by queuing).
	stateAuthQueued
	// stateAuthChecking: the check is being computed; parsing waits and
	// the auth timeout waits for its answer (one hash's cost).
	stateAuthChecking
	// stateAuthChecked: the check's answer (client.auth.pending) waits for
	// the input goroutine to apply it (resumeConnect).
	stateAuthChecked
	// stateReady: commands are served.
	stateReady
	// stateClosing: no more output is accepted; the socket is closed once
	// the outbox is written (the last bytes are usually an -ERR).
	stateClosing
	// stateReleased: subscriptions, pending polls and leases are given
	// back; the socket may still linger half-closed (linger.go).
	stateReleased
	// stateClosed: the socket is gone and the connection forgotten.
	stateClosed
)

var stateNames = [...]string{"await_connect", "auth_queued", "auth_checking", "auth_checked", "ready", "closing", "released", "closed"}

func (s connState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// legalNext reports whether a connection may go from from to to.
func legalNext(from, to connState) bool {
	switch to {
	case stateAuthQueued:
		return from == stateAwaitConnect
	case stateAuthChecking:
		return from == stateAuthQueued
	case stateAuthChecked:
		// A check the queue sheds or drops is answered without running.
		return from == stateAuthQueued || from == stateAuthChecking
	case stateReady:
		// Accepted at once (no check, or a remembered answer), or after
		// the check.
		return from == stateAwaitConnect || from == stateAuthChecked
	case stateClosing, stateReleased, stateClosed:
		return from < to
	}
	return false
}

// lifecycle holds a connection's state.
type lifecycle struct{ v atomic.Uint32 }

// load returns the current state. Any goroutine.
func (l *lifecycle) load() connState { return connState(l.v.Load()) }

// to moves the state to next and returns the state it left. It reports
// false, changing nothing, when the move is not legal from the current
// state (another goroutine may have moved it first: a connection closed
// during its password check stays closed). Any goroutine; the closing
// side is entered with client.answers.mu and client.mu held.
func (l *lifecycle) to(next connState) (prev connState, ok bool) {
	for {
		cur := l.v.Load()
		if !legalNext(connState(cur), next) {
			return connState(cur), false
		}
		if l.v.CompareAndSwap(cur, uint32(next)) {
			return connState(cur), true
		}
	}
}
