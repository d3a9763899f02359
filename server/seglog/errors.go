package seglog

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns wraps one of these (with
// context), so callers test them with errors.Is.
var (
	// ErrNotFound: the sequence number was truncated away or not yet written.
	ErrNotFound = errors.New("seglog: record not found")
	// ErrCorrupt: stored bytes fail their checksum or framing. Reads never
	// return such bytes as data; Open refuses a log with a damaged record
	// before its tail unless Options.SkipCorrupt is set. The concrete error
	// is a *CorruptError carrying the position.
	ErrCorrupt = errors.New("seglog: corrupt record")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("seglog: store closed")
	// ErrSyncFailed: an fsync failed. Records written since the last good
	// fsync may be lost, so the log never reports them durable; every later
	// Append and Sync fails with this error until the log is reopened (which
	// recovers from what is really on disk).
	ErrSyncFailed = errors.New("seglog: fsync failed; reopen the log")
	// ErrWriteFailed: a write or a preallocation failed (a full disk, an I/O
	// error). Nothing of the batch is reported durable and the log stays
	// consistent; a later Append may succeed once the cause is gone. The
	// underlying error (for example syscall.ENOSPC) is wrapped too.
	ErrWriteFailed = errors.New("seglog: write failed")
	// ErrLocked: another process (or another Log in this process) holds the
	// directory's lock.
	ErrLocked = errors.New("seglog: log directory is locked by another process")
	// ErrTooLarge: an entry does not fit in a segment, or its Meta is longer
	// than MaxMetaSize.
	ErrTooLarge = errors.New("seglog: entry too large")
	// ErrEmptyBatch: Append was called with no entries.
	ErrEmptyBatch = errors.New("seglog: empty batch")
	// ErrReadOnly: a write to a log opened with Options.ReadOnly.
	ErrReadOnly = errors.New("seglog: log opened read-only")
	// ErrInvalidOptions: Options failed validation.
	ErrInvalidOptions = errors.New("seglog: invalid options")
)

// CorruptError reports where damaged bytes were found. It wraps ErrCorrupt.
type CorruptError struct {
	// Path is the segment (or index) file holding the damage.
	Path string
	// Offset is the byte offset of the damaged record within Path.
	Offset int64
	// Seq is the sequence number expected at Offset (0 if unknown).
	Seq Seq
	// Reason says what check failed.
	Reason string
}

// Error implements error.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("seglog: corrupt record in %s at offset %d (seq %d): %s", e.Path, e.Offset, e.Seq, e.Reason)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// ErrSideNoRoom: AppendSide found no room for a side record in the active
// segment (it never starts a segment), or a segment holding no record yet.
// Nothing was written; make what the side record would have carried
// durable some other way.
var ErrSideNoRoom = errors.New("seglog: no room for a side record in the active segment")
