package cluster

import (
	"errors"
	"fmt"
	"sync/atomic"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Local work (raft's AsyncStorageWrites): each Ready's writes come as a
// MsgStorageAppend for the append worker and its committed entries as a
// MsgStorageApply for the apply worker. Each worker takes its jobs in
// order, one at a time; when a job is done the raft loop steps the
// responses it carries (in their order), so raft learns an entry is
// stable or applied only once it is. The loop never waits for either:
// it keeps ticking, stepping and sending (the leader's MsgApp to its
// followers leaves while its own append is still being fsynced). The
// jobs a replica holds, queued or running, are bounded by maxLocalJobs;
// at the bound the loop takes no new Ready until a job is done.
//
// The apply worker owns the state machine and the snapshots it takes;
// the loop owns raft and the proposals. Conf changes are handed to raft
// (ApplyConfChange) by the loop as it routes the entries, so that each
// apply job carries the conf state at its end, which a snapshot taken
// there records. A received snapshot is stored by the append worker and
// then restored into the state machine as an apply job, after the
// entries before it and before any after it.

// maxLocalJobs bounds a replica's append and apply jobs, queued or
// running.
const maxLocalJobs = 64

// applyJob is one MsgStorageApply, or a received snapshot to restore,
// for the apply worker.
type applyJob struct {
	ents  []*pb.Entry
	cs    *pb.ConfState // the conf state after ents, for a snapshot taken at their end
	snap  *pb.Snapshot  // a received snapshot to restore instead of ents
	flush bool          // only store the held snapshot (applier.heldAt)
	resps []*pb.Message // stepped once the job is done
	done  []doneAt      // proposals of this replica that ents complete
	// applied is set by the worker: the index the state machine reached.
	applied uint64
	err     error
}

// doneAt is a proposal (by its number) an entry at index completes.
type doneAt struct{ id, index uint64 }

// applier is the apply worker's state: the state machine, the index it
// reached, and the latest snapshot of the raft log. Only the apply
// worker touches it once the replica is open.
type applier struct {
	st        *Storage
	sm        StateMachine
	every     uint64
	applied   uint64
	snapIndex uint64
	// skipTo is the state machine's applied index at open: entries up to
	// it are not applied to it again (their conf changes are applied to
	// raft by the loop, whose configuration is rebuilt from the
	// snapshot's).
	skipTo uint64
	// compactTo is the highest index a snapshot may be taken at
	// (Config.CompactBehindMatch), set by the loop.
	compactTo *atomic.Uint64
	// acked is the applied index the loop has told raft (applyDone). The
	// raft log is compacted only up to it: raft scans its unapplied
	// committed entries (for conf changes, when it campaigns), and one
	// compacted away under it panics. held is a snapshot taken past it,
	// stored once acked reaches its index.
	acked *atomic.Uint64
	held  *heldSnap
	// heldAt is held's index (0: none), for the loop, which then queues
	// a flush job once raft knows it applied (applyDone): the snapshot is
	// stored even when no other entry comes.
	heldAt atomic.Uint64
	// due: a snapshot was due but held back by compactTo; the loop then
	// queues a flush job once compactTo reaches the applied index, which
	// takes it (an idle group would otherwise never snapshot, and a
	// replica added after the last snapshot never get one it may
	// restore). cs is the conf state at applied, for that snapshot.
	due atomic.Bool
	cs  *pb.ConfState
}

// heldSnap is a state machine snapshot waiting to be stored.
type heldSnap struct {
	index uint64
	cs    *pb.ConfState
	data  []byte
}

// run does one apply job: restore its snapshot, or apply its entries and
// snapshot every Config.SnapshotEvery entries. It sets j.applied.
func (a *applier) run(j *applyJob) error {
	if err := a.storeHeld(); err != nil {
		return err
	}
	if j.flush {
		j.applied = a.applied
		if a.due.Load() && a.cs != nil {
			return a.maybeSnapshot(a.cs)
		}
		return nil
	}
	if j.snap != nil {
		m := j.snap.GetMetadata()
		if err := a.sm.Restore(m.GetIndex(), j.snap.Data); err != nil {
			return fmt.Errorf("cluster: restore snapshot %d: %w", m.GetIndex(), err)
		}
		a.applied, a.snapIndex, a.cs = m.GetIndex(), m.GetIndex(), m.GetConfState()
		a.due.Store(false)
		if a.held != nil && a.held.index <= a.applied {
			a.held = nil // the received snapshot is newer
			a.heldAt.Store(0)
		}
		j.applied = a.applied
		return nil
	}
	for _, e := range j.ents {
		idx := e.GetIndex()
		var data []byte
		if e.GetType() == pb.EntryType_EntryNormal && len(e.Data) >= envelope {
			data = e.Data[envelope:]
		}
		if idx > a.skipTo {
			if err := a.sm.Apply(idx, data); err != nil {
				return fmt.Errorf("cluster: apply entry %d: %w", idx, err)
			}
		}
		a.applied = idx
	}
	j.applied = a.applied
	if j.cs != nil {
		a.cs = j.cs
	}
	return a.maybeSnapshot(j.cs)
}

// maybeSnapshot snapshots the state machine at the applied index, with
// its conf state cs, once SnapshotEvery entries were applied since the
// last snapshot.
func (a *applier) maybeSnapshot(cs *pb.ConfState) error {
	// Below skipTo the state machine is ahead of a.applied: a snapshot
	// of it would not be the state at a.applied.
	if a.every == 0 || a.applied < a.skipTo || a.applied-a.snapIndex < a.every {
		return nil
	}
	if a.applied > a.compactTo.Load() {
		a.due.Store(true)
		return nil
	}
	a.due.Store(false)
	if a.held != nil {
		return nil // one at a time
	}
	data, err := a.sm.Snapshot()
	if err != nil {
		return fmt.Errorf("cluster: snapshot at %d: %w", a.applied, err)
	}
	a.held = &heldSnap{index: a.applied, cs: cs, data: data}
	a.heldAt.Store(a.applied)
	return a.storeHeld()
}

// storeHeld stores the held snapshot (compacting the raft log) once raft
// knows its index applied.
func (a *applier) storeHeld() error {
	h := a.held
	if h == nil || a.acked.Load() < h.index {
		return nil
	}
	a.held = nil
	a.heldAt.Store(0)
	// A snapshot received meanwhile (stored by the append worker) is
	// newer: this one is not needed.
	if err := a.st.CreateSnapshot(h.index, h.cs, h.data); err != nil && !errors.Is(err, raft.ErrSnapOutOfDate) {
		return err
	}
	a.snapIndex = max(a.snapIndex, h.index)
	return nil
}

// routeApply turns a MsgStorageApply into an apply job: it hands the
// conf changes among the entries to raft and notes the proposals they
// complete.
func (r *replica) routeApply(m *pb.Message) error {
	j := &applyJob{ents: m.GetEntries(), resps: m.GetResponses()}
	for _, e := range j.ents {
		idx := e.GetIndex()
		switch e.GetType() {
		case pb.EntryType_EntryNormal:
			if id, p := r.ours(e); p != nil {
				j.done = append(j.done, doneAt{id, idx})
			}
		case pb.EntryType_EntryConfChange:
			var cc pb.ConfChange
			if err := proto.Unmarshal(e.Data, &cc); err != nil {
				return fmt.Errorf("cluster: conf change %d: %w", idx, err)
			}
			r.cs = r.rn.ApplyConfChange(&cc)
		case pb.EntryType_EntryConfChangeV2:
			var cc pb.ConfChangeV2
			if err := proto.Unmarshal(e.Data, &cc); err != nil {
				return fmt.Errorf("cluster: conf change %d: %w", idx, err)
			}
			r.cs = r.rn.ApplyConfChange(&cc)
			if id, p := r.oursEnv(cc.Context); p != nil {
				j.done = append(j.done, doneAt{id, idx})
			}
		}
	}
	j.cs = r.cs
	r.applyq = append(r.applyq, j)
	r.jobs++
	return nil
}

// applyDone takes back a job the apply worker finished: the proposals it
// applied succeed, reads waiting for its index complete, and raft hears
// that the entries are applied.
func (r *replica) applyDone(j *applyJob) error {
	r.jobs--
	if j.err != nil {
		return j.err
	}
	r.applied = j.applied
	if j.flush {
		r.flushing = false
	}
	defer r.queueFlush()
	defer r.ap.acked.Store(r.applied) // once raft has stepped the responses below
	for _, d := range j.done {
		if p := r.pending[d.id]; p != nil {
			delete(r.pending, d.id)
			p.finish(d.index, nil)
		}
	}
	r.finishReads()
	for _, m := range j.resps {
		_ = r.rn.Step(m) // a response raft no longer needs is raft's to ignore
	}
	return nil
}

// persist does append jobs on the append worker, in order: the
// snapshot, the entries and the hard state of each MsgStorageAppend,
// then one fsync for them all when raft needs any durable (entries, a
// snapshot, a new term or vote: raft's MustSync), before the responses
// that depend on them are released. The worker hands it every job
// waiting, so that the jobs queued while one fsync ran share the next
// (the group commit a synchronous loop got from batching proposals).
func (r *replica) persist(ms []*pb.Message) error {
	sync := false
	for _, m := range ms {
		var hs *pb.HardState
		if m.Term != nil || m.Vote != nil || m.Commit != nil {
			hs = &pb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
		}
		snap := m.GetSnapshot()
		sync = sync || len(m.GetEntries()) > 0 ||
			hs != nil && (hs.GetTerm() != r.savedHS.GetTerm() || hs.GetVote() != r.savedHS.GetVote())
		// A snapshot is synced by Save itself, before older files go.
		if err := r.st.Save(hs, m.GetEntries(), snap, false); err != nil {
			return err
		}
		if hs != nil {
			r.savedHS = hs
		}
	}
	if !sync {
		return nil
	}
	return r.st.Sync()
}

// appendDone takes back a job the append worker finished: a received
// snapshot goes to the apply worker, the responses to this replica are
// stepped and the others sent.
func (r *replica) appendDone(m *pb.Message, err error) error {
	r.jobs--
	if err != nil {
		return err
	}
	if r.cfg.ackOnLocalAppend {
		for _, e := range m.GetEntries() {
			if id, p := r.ours(e); p != nil {
				delete(r.pending, id)
				p.finish(e.GetIndex(), nil)
			}
		}
	}
	if snap := m.GetSnapshot(); snap != nil && !raft.IsEmptySnap(snap) {
		r.cs = snap.GetMetadata().GetConfState()
		r.applyq = append(r.applyq, &applyJob{snap: snap})
		r.jobs++
	}
	var out []*pb.Message
	for _, resp := range m.GetResponses() {
		if resp.GetTo() == r.cfg.ID {
			_ = r.rn.Step(resp)
		} else {
			out = append(out, resp)
		}
	}
	r.send(out)
	return nil
}

// queueFlush (loop, after applyDone) queues a flush job when the apply
// worker holds a snapshot raft now knows applied, within the job bound.
func (r *replica) queueFlush() {
	if h := r.ap.heldAt.Load(); h == 0 || h > r.applied || r.flushing || r.jobs >= maxLocalJobs {
		return
	}
	r.flushing = true
	r.applyq = append(r.applyq, &applyJob{flush: true})
	r.jobs++
}
