package broker

// Full disks. A log that finds no room (ENOSPC from fallocate or a write)
// refuses the append with ErrDiskFull and stores nothing; the engine keeps
// running and retries with each later append, which the log allocates as
// small as it needs (seglog), so writing resumes as soon as the disk has
// that much room. The broker records the episode (DiskFull, for /readyz and
// /metrics) and reports it through Options.Logf, marked ERROR, once when
// it starts, and once more when an append succeeds again.

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// DiskFull describes a full-disk episode.
type DiskFull struct {
	// Path is the log directory that found the disk full first.
	Path string `json:"path"`
	// Since is when the episode started.
	Since time.Time `json:"since"`
}

// DiskFull returns the current full-disk episode, if one is going on.
func (b *Broker) DiskFull() (DiskFull, bool) {
	if d := b.diskFull.Load(); d != nil {
		return *d, true
	}
	return DiskFull{}, false
}

// isDiskFull reports whether err comes from a disk without room.
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// noteWriteErr records a full disk met by the log in dir and returns err,
// wrapped with ErrDiskFull when that is what it is.
func (b *Broker) noteWriteErr(dir string, err error) error {
	if !isDiskFull(err) {
		return b.noteFileErr(err) // a roll may need a new segment file
	}
	if b.diskFull.CompareAndSwap(nil, &DiskFull{Path: dir, Since: time.Now()}) {
		b.alertf("disk full at %s: publishes are refused with disk_full until it has room: %v", dir, err)
	}
	return fmt.Errorf("%w: %w", ErrDiskFull, err)
}

// noteWriteOK ends a full-disk episode once an append succeeds again.
func (b *Broker) noteWriteOK() {
	if b.diskFull.Load() == nil {
		return
	}
	if d := b.diskFull.Swap(nil); d != nil {
		b.logf("disk has room again (full since %s at %s): writing resumed", d.Since.Format(time.RFC3339), d.Path)
	}
}

// alertf reports what an operator must act on, marked ERROR as the
// engine's other such reports are (damaged data).
func (b *Broker) alertf(format string, args ...any) { b.logf("ERROR "+format, args...) }
