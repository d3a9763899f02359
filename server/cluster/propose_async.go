package cluster

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Non-blocking proposals: ProposeAsync queues a proposal for the loop and
// returns; its done callback runs once, on the loop, when the entry is
// applied here or failed. A caller keeps many entries in flight without
// a goroutine or a channel each (a partition's log proposes every batch
// so). The queue and the proposals in flight together are bounded by
// Config.MaxPendingProposals.

// asyncQueue holds the proposals ProposeAsync queued for the loop. mu
// orders a ProposeAsync against the drain at the loop's end, so that no
// proposal is queued behind it and left without an answer.
type asyncQueue struct {
	c      chan asyncReq
	max    int64
	n      atomic.Int64 // queued or in flight, not yet answered
	mu     sync.Mutex
	closed bool
}

type asyncReq struct {
	data []byte
	done func(index uint64, err error)
}

func newAsyncQueue(max int) asyncQueue {
	if max <= 0 {
		max = DefaultMaxPendingProposals
	}
	return asyncQueue{c: make(chan asyncReq, max), max: int64(max)}
}

// ProposeAsync proposes data without waiting. It returns at once, and
// done is not called, with ErrTooLarge for data over
// Config.MaxEntryBytes, ErrBusy while Config.MaxPendingProposals
// proposals are queued or in flight, and ErrClosed once the group
// stopped. Otherwise done is called exactly once, on the group's
// goroutine (or Close's), so it must be quick and must not call a
// blocking method of the Group: with the index once the entry is
// committed on a quorum and applied here (callbacks of one leader's
// proposals that succeed come in index order), or with the errors
// Propose returns (ErrNotLeader, ErrBusy: nothing appended;
// ErrLeaderChanged, ErrClosed: outcome unknown). data is copied before
// ProposeAsync returns.
func (g *Group) ProposeAsync(data []byte, done func(index uint64, err error)) error {
	if max := g.r.cfg.MaxEntryBytes; len(data) > max {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(data), max)
	}
	q := &g.async
	if q.n.Add(1) > q.max {
		q.n.Add(-1)
		return fmt.Errorf("%w: %d proposals pending", ErrBusy, q.max)
	}
	// The envelope's room is made here, its header filled on the loop
	// (the proposal number is the loop's).
	buf := make([]byte, envelope, envelope+len(data))
	req := asyncReq{data: append(buf, data...), done: func(index uint64, err error) {
		q.n.Add(-1)
		done(index, err)
	}}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		q.n.Add(-1)
		return ErrClosed
	}
	select {
	case q.c <- req:
		return nil
	default: // cannot happen: c holds max and n counts what it holds
		q.n.Add(-1)
		return fmt.Errorf("%w: proposal queue full", ErrBusy)
	}
}

// handleAsync (loop) hands a queued proposal to raft.
func (g *Group) handleAsync(req asyncReq) {
	if err := g.r.proposeAsync(req.data, req.done); err != nil {
		req.done(0, err)
	}
}

// drain (after the loop ended) answers every queued proposal ErrClosed
// and refuses new ones.
func (q *asyncQueue) drain() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	for {
		select {
		case req := <-q.c:
			req.done(0, ErrClosed)
		default:
			return
		}
	}
}
