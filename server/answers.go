package server

// The answer queue (SPEC.md "Strict answers"): commands are answered in
// the order they were sent, even though their answers complete out of
// order (different partitions, POLL waits, the lane). Each command takes
// a slot on the input goroutine (reserve); whoever completes it fills the
// slot from any goroutine, and the slots done at the head of the queue are
// moved to the outbox in order (client.releaseLocked).
//
// Lock order: answerQueue.mu, then client.mu. The queue's lock guards its
// slots, their contents, the publish window and whether the queue is
// closed. Moving the head answers to the outbox takes client.mu inside it,
// so two completions racing each other still reach the outbox in command
// order; nothing takes answerQueue.mu while holding client.mu. Closing the
// connection (closeWith, release) takes both and closes the queue with the
// outbox, so the queue's closed flag and the client's closing state
// (conn_state.go) always agree.

import (
	"sync"
	"sync/atomic"

	"github.com/fibrilmq/fibril/server/broker"
)

// answer is one slot in the answer queue. Its fields are guarded by the
// queue's lock, except written, which is also read without it (a SUB's
// deliveries go straight to the outbox once its +OK is written).
type answer struct {
	done bool
	data []byte
	// written: data went to the outbox. Set once, under both locks.
	written atomic.Bool
	// tail holds push deliveries of the SUB this slot answers that arrived
	// before the SUB's +OK was written; they follow it out (SPEC.md: a
	// SUB's +OK precedes its deliveries). tailAcks are their ack-on-write
	// handles. Both count in the queue's held bytes until released.
	tail     []byte
	tailAcks []broker.Handle
	// own: the answer completeOwned handed over (pooled chunks, not
	// copied); data is then empty.
	own chunks
	// small holds a short answer (a confirm, +OK, most -ERR lines)
	// without an allocation of its own.
	small [40]byte
	// confirmOf: the connection of a publish confirm slot (reserveConfirm),
	// which the broker reports to through PublishDone.
	confirmOf *client
	// recv: the stage-accounting origin of a sampled publish's confirm
	// (stages.go; 0: not sampled).
	recv int64
}

// answerQueue is a connection's answer slots in command order, and its
// publish window (confirm slots outstanding). The zero value is an empty,
// open queue. Methods ending in Locked need q.mu held.
type answerQueue struct {
	mu          sync.Mutex
	slots       []*answer // not yet written, in command order
	unconfirmed int       // publishes awaiting their confirm
	closed      bool      // the connection is closing: nothing more is written
	// held: bytes of answers done (and SUB tails) that wait behind earlier
	// answers. Changed under mu; read under client.mu too (the MaxPending
	// check), hence atomic.
	held atomic.Int64
}

// reserve takes the next slot in the answer order.
func (q *answerQueue) reserve() *answer {
	a := &answer{}
	q.mu.Lock()
	q.appendLocked(a)
	q.mu.Unlock()
	return a
}

// reserveConfirmLocked takes a slot for a publish confirm of conn when
// the window (limit confirms outstanding) has room, and reports false
// when it is full.
func (q *answerQueue) reserveConfirmLocked(conn *client, limit int) (*answer, bool) {
	if q.unconfirmed >= limit {
		return nil, false
	}
	q.unconfirmed++
	a := &answer{confirmOf: conn}
	q.appendLocked(a)
	return a, true
}

// appendLocked queues a (a closed queue forgets it: it is never written).
func (q *answerQueue) appendLocked(a *answer) {
	if !q.closed {
		q.slots = append(q.slots, a)
	}
}

// fillLocked marks a done with a copy of data; confirm also reopens one
// place in the publish window. It reports false when the queue is closed
// (nothing is stored). A slot is filled once.
func (q *answerQueue) fillLocked(a *answer, data []byte, confirm bool) bool {
	if confirm {
		q.unconfirmed--
	}
	if q.closed {
		return false
	}
	a.done = true
	if a.data == nil && len(data) <= len(a.small) {
		a.data = a.small[:copy(a.small[:], data)] // most answers are short lines
	} else {
		a.data = append(a.data, data...)
	}
	q.held.Add(int64(len(data)))
	return true
}

// fillOwnedLocked marks a done with the chunks of own, which it takes
// (own is empty after the call). The queue must be open.
func (q *answerQueue) fillOwnedLocked(a *answer, own *chunks) {
	a.done = true
	q.held.Add(int64(own.n))
	a.own.moveFrom(own)
}

// holdTailLocked appends a delivery (its encoding grew a.tail by n bytes)
// to wait behind a, the slot of its SUB's +OK.
func (q *answerQueue) holdTailLocked(n int) { q.held.Add(int64(n)) }

// headLocked returns the slots done at the head of the queue: the answers
// that may be written now, in order. The caller writes them (marking each
// written) and then drops them with dropLocked.
func (q *answerQueue) headLocked() []*answer {
	n := 0
	for n < len(q.slots) && q.slots[n].done {
		n++
	}
	return q.slots[:n]
}

// dropLocked forgets the first n slots, which the caller has written, and
// the bytes they held.
func (q *answerQueue) dropLocked(n, bytes int) {
	if n == 0 {
		return
	}
	clear(q.slots[:n])
	q.slots = q.slots[n:]
	if len(q.slots) == 0 {
		q.slots = nil
	}
	q.held.Add(-int64(bytes))
}

// pendingLocked is how many slots wait to be written.
func (q *answerQueue) pendingLocked() int { return len(q.slots) }

// closeLocked abandons every slot: the connection is going away. Later
// fills are dropped and later slots never written.
func (q *answerQueue) closeLocked() {
	q.closed = true
	q.slots = nil
	q.held.Store(0)
}
