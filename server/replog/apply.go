package replog

import (
	"fmt"

	"github.com/fibrilmq/fibril/server/cluster"
	"github.com/fibrilmq/fibril/server/seglog"
)

// The state machine: Pair implements cluster.StateMachine. The group's
// apply worker calls it, one call at a time, on every replica, the
// leader included; it is the only writer of the local logs.

var _ cluster.StateMachine = (*Pair)(nil)

// Applied returns the index of the applied mark: the local logs hold
// everything up to it, fsynced.
func (p *Pair) Applied() uint64 { return p.applied }

// Apply applies the committed entry at index. A record entry is applied
// only when its first seq is the log's next applied seq (an entry whose
// predecessor of the same epoch was lost is skipped, on every replica
// alike, and its epoch fails); of an applied entry, the records a local
// log already holds (a replay after a restart) are skipped, and a local
// log ending before the entry's first seq is ErrCorrupt.
func (p *Pair) Apply(index uint64, data []byte) error {
	if len(data) == 0 {
		return p.noteApplied(index, 0, false)
	}
	e, err := decodeEntry(data)
	if err != nil {
		return fmt.Errorf("replog %s: entry %d: %w", p.dir, index, err)
	}
	force := false
	switch e.tag {
	case tagData, tagEvents:
		l := p.logOf(e.tag)
		ok, err := l.applyRecords(&e)
		if err != nil {
			return fmt.Errorf("replog %s: entry %d: %w", p.dir, index, err)
		}
		if !ok {
			p.skipped(&e)
		}
	case tagTruncData, tagTruncEvents:
		l := p.logOf(e.tag - (tagTruncData - tagData))
		p.cutMu.Lock() // not while the fetch server copies records (serve.go)
		err := l.loc().TruncateFront(e.first)
		p.cutMu.Unlock()
		if err != nil {
			return fmt.Errorf("replog %s: entry %d: truncate %s below %d: %w", p.dir, index, l.loc().Dir(), e.first, err)
		}
	case tagState:
		if err := checkStateName(e.name); err != nil {
			return fmt.Errorf("%w: replog %s: entry %d: %v", ErrCorrupt, p.dir, index, err)
		}
		// The logs first: the state describes them as of this entry.
		if err := p.syncLocal(); err != nil {
			return err
		}
		if err := writeFileAtomic(p.dir, e.name, e.state); err != nil {
			return fmt.Errorf("replog %s: entry %d: %w", p.dir, index, err)
		}
		p.stateAt, force = index, true // never applied again after a restart
	}
	return p.noteApplied(index, len(data), force)
}

func (p *Pair) logOf(tag byte) *Log {
	if tag == tagData {
		return p.data
	}
	return p.events
}

// skipped ends the serving epoch of this replica whose entry was skipped.
func (p *Pair) skipped(e *entry) {
	p.mu.Lock()
	changed := false
	if e.proposer == p.id && e.epoch == p.epoch && p.serving {
		changed = p.failEpochLocked(fmt.Errorf("entry for seq %d skipped: a predecessor was lost", e.first))
	}
	p.mu.Unlock()
	if changed {
		p.fire()
	}
}

// noteApplied moves the applied index and writes the mark when it is
// due (force: now).
func (p *Pair) noteApplied(index uint64, n int, force bool) error {
	p.applied = index
	p.seen.Store(index)
	p.sinceMark++
	p.markBytes += n
	if !force && p.sinceMark < p.cfg.MarkEvery && p.markBytes < markBytes {
		return nil
	}
	return p.writeMark()
}

// syncLocal fsyncs both local logs.
func (p *Pair) syncLocal() error {
	for _, l := range [...]*Log{p.data, p.events} {
		if _, err := l.loc().Sync(); err != nil {
			return fmt.Errorf("replog: sync %s: %w", l.loc().Dir(), err)
		}
	}
	return nil
}

// writeMark fsyncs the local logs, then records the applied index they
// hold (apply worker, or after it stopped).
func (p *Pair) writeMark() error {
	if err := p.syncLocal(); err != nil {
		return err
	}
	if err := writeFileAtomic(p.dir, appliedName, encodeMark(p.mark())); err != nil {
		return err
	}
	p.sinceMark, p.markBytes = 0, 0
	return nil
}

func (p *Pair) mark() mark {
	p.mu.Lock()
	defer p.mu.Unlock()
	return mark{index: p.applied, nextData: p.data.applyNext, nextEv: p.events.applyNext, stateAt: p.stateAt, gen: p.gen}
}

// Snapshot returns a descriptor of the logs (the mark, written first):
// not their contents, which stay in the segment files.
func (p *Pair) Snapshot() ([]byte, error) {
	if err := p.writeMark(); err != nil {
		return nil, err
	}
	return encodeMark(p.mark()), nil
}

// Restore takes a snapshot at index. Its data is a descriptor (the
// mark), not the logs: when the local logs already hold what it
// describes (every record, the last state file) it only moves the mark;
// else it fetches the logs from another replica and switches to them
// (restore.go), retrying until that succeeds or the pair closes. The
// logs may then hold more than the mark: the entries raft sends after
// the snapshot are applied by the usual rule, the records present
// skipped.
func (p *Pair) Restore(index uint64, data []byte) error {
	m := mark{index: index, nextData: 1, nextEv: 1} // a new group's snapshot (bootstrap) is empty
	if len(data) > 0 {
		var err error
		if m, err = decodeMark(data); err != nil {
			return fmt.Errorf("replog %s: snapshot %d: %w", p.dir, index, err)
		}
	}
	if !p.holds(m) {
		return p.restoreFromPeer(index, m)
	}
	p.mu.Lock()
	p.data.applyNext, p.events.applyNext = m.nextData, m.nextEv
	p.mu.Unlock()
	p.applied, p.stateAt = index, max(p.stateAt, m.stateAt)
	p.seen.Store(index)
	return p.writeMark()
}

// applyRecords writes e's records at their seqs if e follows what the
// log applied; ok false: skipped (its first seq is not the next).
func (l *Log) applyRecords(e *entry) (ok bool, err error) {
	if e.first != l.applyNext { // written only by this goroutine
		return false, nil
	}
	_, last := l.loc().Bounds()
	end := e.first + seglog.Seq(len(e.recs)) - 1
	if last+1 < e.first {
		return false, fmt.Errorf("%w: %s ends at %d, the entry applied next starts at %d: records lost", ErrCorrupt, l.loc().Dir(), last, e.first)
	}
	if last < end {
		recs := e.recs[last+1-e.first:]
		ents := make([]seglog.Entry, len(recs))
		for i, r := range recs {
			ents[i] = seglog.Entry{Meta: r.Meta, Data: r.Data, Time: r.Time, CRC: r.CRC}
		}
		got, err := l.loc().Append(ents)
		if err != nil {
			return false, fmt.Errorf("replog: apply to %s: %w", l.loc().Dir(), err)
		}
		if got != last+1 {
			return false, fmt.Errorf("%w: %s gave seq %d, want %d", ErrCorrupt, l.loc().Dir(), got, last+1)
		}
	}
	p := l.p
	p.mu.Lock()
	l.applyNext = end + 1
	l.trimPendLocked(end)
	p.mu.Unlock()
	return true, nil
}
