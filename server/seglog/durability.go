package seglog

import (
	"fmt"
	"sync/atomic"
)

// durability is what the log knows to be on disk: the highest record
// fsynced, the side records written and fsynced (side.go), and the first
// failed fsync, after which nothing more is confirmed (ErrSyncFailed). It
// decides nothing: the owner of each fsync (Append under PolicySync, Sync,
// a roll, Close) tells it what that fsync covered. Every field is an
// atomic under no lock: Durable, DurableSide and the writers read them
// beside a running fsync.
type durability struct {
	point atomic.Uint64 // highest sequence number known on disk
	// sideN: side records written so far (their marks are 1, 2, ...;
	// published under Log.mu); sideDone: the highest mark known on disk.
	sideN, sideDone atomic.Uint64
	failed          atomic.Pointer[error] // sticky: the first failed fsync
	// parentPending: the log directory's entry in its parent is not known
	// durable (Open sets it); synced with the active segment's entry
	// before the first record is reported durable (see syncSegment).
	parentPending atomic.Bool
}

// durable returns the durable point.
func (d *durability) durable() Seq { return Seq(d.point.Load()) }

// raise raises the durable point to seq and reports whether it rose.
func (d *durability) raise(seq Seq) bool {
	for {
		cur := d.point.Load()
		if uint64(seq) <= cur {
			return false
		}
		if d.point.CompareAndSwap(cur, uint64(seq)) {
			return true
		}
	}
}

// sideWritten returns the mark of the last side record written.
func (d *durability) sideWritten() uint64 { return d.sideN.Load() }

// addSide counts one more side record written and returns its mark.
func (d *durability) addSide() uint64 { return d.sideN.Add(1) }

// sideDurable returns the highest side mark known on disk.
func (d *durability) sideDurable() uint64 { return d.sideDone.Load() }

// raiseSide raises the durable side mark to mark.
func (d *durability) raiseSide(mark uint64) {
	for {
		cur := d.sideDone.Load()
		if mark <= cur || d.sideDone.CompareAndSwap(cur, mark) {
			return
		}
	}
}

// covers reports whether every record up to last and every side record up
// to mark side is durable (nothing for an fsync to do).
func (d *durability) covers(last Seq, side uint64) bool {
	return d.durable() >= last && d.sideDurable() >= side
}

// fail records a failed fsync (sticky: the first one stays) and returns
// the error every later write and Sync reports.
func (d *durability) fail(err error) error {
	e := fmt.Errorf("%w: %w", ErrSyncFailed, err)
	d.failed.CompareAndSwap(nil, &e)
	return *d.failed.Load()
}

// err returns the error of a past failed fsync, or nil.
func (d *durability) err() error {
	if e := d.failed.Load(); e != nil {
		return *e
	}
	return nil
}
