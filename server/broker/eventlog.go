package broker

import (
	"fmt"

	"github.com/fibrilmq/fibril/server/seglog"
)

// eventWriter (actor) writes a partition's consumer-state events: the
// groups emit a round's events into sink, commitEvents appends them as
// one batch of records, and every SnapshotEvery events a snapshot of the
// whole state lets the log drop what came before (snapshot.go holds the
// file format; the log keeps the events after the previous snapshot, for
// History).
type eventWriter struct {
	sink    evSink         // this round's events, not yet written
	entries []seglog.Entry // the records of the round's append (scratch)
	last    Seq            // the last event record written
	// unsnapped: events written since the newest snapshot began.
	unsnapped int
	snapSeq   Seq           // last event of the newest snapshot; History keeps those after the one before
	snapDone  chan struct{} // a snapshot is being written off the actor (snapshotAsync)
}

// pending reports whether the round emitted events.
func (w *eventWriter) pending() bool { return len(w.sink.b) > 0 }

// append appends the round's events to log, as records of about one chunk
// each with meta on every one. It returns the first record's number and
// the records, whose bytes stay valid until written or refused.
func (w *eventWriter) append(log seglog.Store, meta []byte, now int64) (Seq, []seglog.Entry, error) {
	w.entries = w.entries[:0]
	from := 0
	for _, cut := range append(w.sink.cuts, len(w.sink.b)) {
		w.entries = append(w.entries, seglog.Entry{Meta: meta, Data: w.sink.b[from:cut], Time: now})
		from = cut
	}
	first, err := log.Append(w.entries)
	return first, w.entries, err
}

// written takes an append that succeeded from record first: the round's
// events count toward the next snapshot and leave the sink. It returns the
// last record written.
func (w *eventWriter) written(first Seq) Seq {
	w.last = first + Seq(len(w.entries)) - 1
	clear(w.entries)
	w.unsnapped += w.sink.n
	w.sink.reset()
	return w.last
}

// refused takes an append that failed: the events stay in the sink, ahead
// of the next round's, unless they pass bound bytes; then they are
// dropped (the next snapshot, which holds the whole state, records them)
// and their number returned.
func (w *eventWriter) refused(bound int) (dropped int) {
	clear(w.entries)
	if len(w.sink.b) <= bound {
		return 0
	}
	dropped = w.sink.n
	w.unsnapped += w.sink.n
	w.sink.reset()
	return dropped
}

// snapshotDue reports whether every events have been written since the
// newest snapshot began and none is being written.
func (w *eventWriter) snapshotDue(every int) bool { return w.unsnapped >= every && w.snapDone == nil }

// beginSnapshot starts a snapshot as of the last event written: it returns
// that event and the one the newest snapshot covers, and starts counting
// toward the next one.
func (w *eventWriter) beginSnapshot() (seq, prev Seq) {
	w.unsnapped = 0
	return w.last, w.snapSeq
}

// reset empties the sink, keeping its buffers.
func (e *evSink) reset() { e.b, e.n, e.cuts, e.from = e.b[:0], 0, e.cuts[:0], 0 }

// commitEvents appends this round's events as one record. A failure is
// reported to the settle callers of this round.
func (p *partition) commitEvents() {
	if !p.evw.pending() {
		return
	}
	pos := p.last + 1 // where the side copy goes
	first, entries, err := p.evw.append(p.events, p.side.eventMeta(pos), p.now)
	if err == nil && p.side.on() {
		p.writeSideCopy(first, entries, pos)
	}
	if err != nil {
		full := isDiskFull(err)
		p.commit.roundErr = fmt.Errorf("topic %s partition %d: event log: %w", p.t.name, p.idx, p.t.b.noteWriteErr(p.dir, err))
		if !full {
			p.t.b.logf("%v", p.commit.roundErr) // a full disk is reported once per episode
		}
		// The state changes are made; keep their events and write them
		// ahead of the next round's, so a log that recovers (disk space
		// returns) still records them. Past a bound, the next snapshot
		// (which holds the whole state) has to do.
		if n := p.evw.refused(maxRetainedEvents); n > 0 {
			p.t.b.logf("topic %s partition %d: dropping %d unwritten events; the next snapshot records their state", p.t.name, p.idx, n)
		}
		return
	}
	seq := p.evw.written(first)
	if !p.commit.pipelined {
		p.commit.durEvents = seq
	}
	if p.evw.snapshotDue(p.t.b.opts.SnapshotEvery) {
		p.snapshotAsync()
	}
}

// maxRetainedEvents bounds the events kept in memory while the event log
// refuses writes.
const maxRetainedEvents = 64 << 20

// snapshot writes the consumer state and drops the events it covers, on
// the actor (shutdown). A background snapshot still running is waited for
// first.
func (p *partition) snapshot() error {
	p.evw.waitSnapshot()
	seq, prev := p.evw.beginSnapshot()
	if err := p.writeSnapshot(p.encodeSnapshot(), seq, prev); err != nil {
		return err
	}
	p.evw.snapSeq = seq
	return nil
}

// snapshotAsync captures the consumer state on the actor (a copy of the
// frontiers, spans and pending offsets: captureSnapshot) and encodes and
// writes it on a goroutine of its own, so the sort, the encoding, the
// fsyncs, the rename and the event-log truncation do not stall the
// partition's rounds. One runs at a time; the next is due SnapshotEvery
// events after this one started.
func (p *partition) snapshotAsync() {
	seq, prev := p.evw.beginSnapshot()
	st := p.captureSnapshot()
	done := make(chan struct{})
	p.evw.snapDone = done
	go func() {
		defer close(done)
		err := p.writeSnapshot(st.encode(), seq, prev)
		p.control(func(p *partition) {
			if p.evw.snapDone == done {
				p.evw.snapDone = nil
			}
			if err != nil {
				p.t.b.logf("%v", err)
				return
			}
			p.evw.snapSeq = max(p.evw.snapSeq, seq)
		})
	}()
}

// waitSnapshot waits for a background snapshot to end (actor only).
func (w *eventWriter) waitSnapshot() {
	if w.snapDone != nil {
		<-w.snapDone
		w.snapDone = nil
	}
}

// encodeSnapshot is the state as of the last event written (actor only).
func (p *partition) encodeSnapshot() []byte { return p.captureSnapshot().encode() }

// captureSnapshot copies the state as of the last event written (actor
// only).
func (p *partition) captureSnapshot() *snapState {
	gs := make([]*groupState, 0, len(p.order)+1)
	if p.purgeFloor > 0 {
		// Group id 0 is never a real group: it carries the purge floor.
		gs = append(gs, newGroupState(0, 0, 0, p.purgeFloor))
	}
	for _, gp := range p.order {
		gs = append(gs, gp.groupState)
	}
	return captureSnapshot(p.evw.last, gs)
}

// writeSnapshot makes the events up to seq durable, writes data (the
// state as of seq) and drops the events the previous snapshot (prev)
// covered, so the history of recent messages survives a snapshot (and the
// one every Close writes). Safe off the actor: the event log allows Sync
// and TruncateFront beside the actor's appends.
func (p *partition) writeSnapshot(data []byte, seq, prev Seq) error {
	if p.commit.pipelined {
		// The snapshot covers events up to seq: they must be on disk
		// first, or a crash could leave the log short of the snapshot.
		if _, err := p.events.Sync(); err != nil {
			return fmt.Errorf("topic %s partition %d: snapshot: sync events: %w", p.t.name, p.idx, err)
		}
	}
	if err := p.writeState(snapName, data); err != nil {
		return fmt.Errorf("topic %s partition %d: snapshot: %w", p.t.name, p.idx, err)
	}
	if seq == prev {
		return nil // nothing new: keep the window History reads
	}
	if err := p.events.TruncateFront(prev + 1); err != nil {
		return fmt.Errorf("topic %s partition %d: truncate events: %w", p.t.name, p.idx, err)
	}
	return nil
}
