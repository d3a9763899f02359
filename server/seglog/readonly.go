package seglog

import (
	"fmt"
	"os"
)

// openReadOnly is Open with Options.ReadOnly: the lock is taken shared (a
// writer elsewhere makes it fail with ErrLocked), the durable-point hint
// is read, and recover rebuilds the log's state without changing a file.
func openReadOnly(l *Log) (*Log, error) {
	if _, err := os.Stat(l.dir); err != nil {
		return nil, fmt.Errorf("seglog: open %s: %w", l.dir, err)
	}
	hint, found, err := l.lockf.openShared(l.fs, l.dir)
	if err != nil {
		return nil, err
	}
	l.rec.DurableHint = hint
	// No LOCK file: never opened for writing (or the file was lost), no hint.
	l.rec.BadLock = !found || badLock(l.lockf.f)
	if err := l.recover(); err != nil {
		l.releaseAll()
		return nil, err
	}
	return l, nil
}

// endReadOnly finishes recover for a read-only log once its segments are
// open and continuous: records the durable point named but missing from
// the end of the log, and publishes the bounds. firsts are the segment
// files' first sequence numbers.
func (l *Log) endReadOnly(firsts []Seq) error {
	if len(l.segs) == 0 {
		start := Seq(1)
		if len(firsts) > 0 {
			start = firsts[len(firsts)-1]
		}
		if l.rec.DurableHint >= start {
			cerr := &CorruptError{Path: l.dir, Seq: start,
				Reason: fmt.Sprintf("no segment file, but the log had made every record up to %d durable", l.rec.DurableHint)}
			if !l.opts.SkipCorrupt {
				return cerr
			}
			l.rec.Skipped = append(l.rec.Skipped, SkippedRange{Path: l.dir, From: start, To: l.rec.DurableHint})
		}
		return nil
	}
	for _, s := range l.segs.sealed() {
		l.rel.closeFile(s)
	}
	act := l.segs.active()
	if act.last < l.rec.DurableHint {
		cerr := &CorruptError{Path: act.path, Offset: act.end, Seq: act.last + 1,
			Reason: fmt.Sprintf("the log ends at %d, but it had made every record up to %d durable", act.last, l.rec.DurableHint)}
		if !l.opts.SkipCorrupt {
			return cerr
		}
		l.skipRange(act, SkippedRange{Path: act.path, Offset: act.end, From: act.last + 1, To: l.rec.DurableHint})
		act.last = l.rec.DurableHint
	}
	l.w.act = act
	l.last.Store(uint64(act.last))
	l.dur.raise(act.last)
	l.rec.Segments = len(l.segs)
	return nil
}

// badLock reports whether a LOCK file's hints are damaged: a size the log
// never writes (0, 16 or 48 bytes), or a hint's bytes neither zero nor
// valid.
func badLock(f File) bool {
	size, err := f.Size()
	if err != nil || size != 0 && size != hintSize && size != frontOff+frontSize && size != verifiedOff+verifiedSize {
		return true
	}
	b := make([]byte, size)
	if n, _ := f.ReadAt(b, 0); int64(n) < size {
		return true
	}
	if size >= hintSize && !allZero(b[:hintSize]) && decodeDurableHint(b[:hintSize]) == 0 {
		return true
	}
	if size >= frontOff+frontSize && !allZero(b[frontOff:frontOff+frontSize]) && readFrontHint(f).front == 0 {
		return true
	}
	return size == verifiedOff+verifiedSize && !allZero(b[verifiedOff:]) && readVerifiedMark(f) == 0
}
