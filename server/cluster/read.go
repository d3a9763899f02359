package cluster

import (
	"encoding/binary"

	"go.etcd.io/raft/v3"
)

// Linearizable reads (raft's ReadIndex): the leader notes its commit
// index, confirms with a round of heartbeats that a quorum still follows
// it, and hands the index back; the read completes once this replica has
// applied that far, so a state machine read then sees every entry
// committed before the read began. A deposed leader cannot complete one.

// readIndex asks raft for a read index; the returned proposal completes
// with it once this replica applied it, or fails as a proposal does
// (ErrLeaderChanged, ErrClosed). A read raft drops (no leader known) ends
// only by the caller's timeout.
func (r *replica) readIndex() *Proposal {
	ctx := r.envelope(nil)
	id := r.next
	r.next++
	p := &Proposal{Done: make(chan struct{})}
	r.reads[id] = p
	r.rn.ReadIndex(ctx)
	return p
}

// noteReads matches rd's read states to pending reads; they then wait
// for the applied index to reach theirs.
func (r *replica) noteReads(rd raft.Ready) {
	for _, rs := range rd.ReadStates {
		ctx := rs.RequestCtx
		if len(ctx) != envelope || binary.LittleEndian.Uint64(ctx) != r.nonce {
			continue
		}
		id := binary.LittleEndian.Uint64(ctx[8:])
		if p := r.reads[id]; p != nil {
			delete(r.reads, id)
			r.readWait = append(r.readWait, readWait{p, rs.Index})
		}
	}
}

// finishReads completes the reads whose index is applied.
func (r *replica) finishReads() {
	keep := r.readWait[:0]
	for _, w := range r.readWait {
		if w.index <= r.applied {
			w.p.finish(w.index, nil)
		} else {
			keep = append(keep, w)
		}
	}
	clear(r.readWait[len(keep):])
	r.readWait = keep
}

// failReads ends every read not complete with err.
func (r *replica) failReads(err error) {
	for id, p := range r.reads {
		p.finish(0, err)
		delete(r.reads, id)
	}
	for _, w := range r.readWait {
		w.p.finish(0, err)
	}
	r.readWait = r.readWait[:0]
}

type readWait struct {
	p     *Proposal
	index uint64
}
