package seglog

import "fmt"

// Defaults applied by Open to zero-valued Options fields.
const (
	// DefaultSegmentSize is the size a segment file grows to before the log
	// starts a new one.
	DefaultSegmentSize = 64 << 20
	// DefaultIndexInterval is the number of bytes between two sparse index
	// entries: a read scans at most about this much past an index point.
	DefaultIndexInterval = 4 << 10
	// MinSegmentSize is the smallest accepted SegmentSize.
	MinSegmentSize = 4 << 10
	// MaxSegmentSize is the largest accepted SegmentSize (2 GiB: one map per
	// segment stays modest).
	MaxSegmentSize = 1 << 31
	// MaxMetaSize is the largest Entry.Meta accepted.
	MaxMetaSize = 1<<16 - 1
)

// Options configures a file-backed Log. The zero value is valid and means:
// 64 MiB segments, PolicySync, the operating system's file system, refuse
// to open a corrupt log. Open never modifies the caller's Options.
type Options struct {
	// SegmentSize is the size in bytes a segment file grows to before the
	// next one starts (default DefaultSegmentSize). The active segment is
	// preallocated progressively: 1 MiB (or SegmentSize if smaller) at
	// first, doubling as appends fill it. A record plus its header must fit
	// in one segment; larger entries are refused with ErrTooLarge.
	SegmentSize int64
	// Policy says who makes an Append durable, and when (default
	// PolicySync: Append itself).
	Policy Policy
	// IndexInterval is the spacing of the sparse per-segment index in bytes
	// (default DefaultIndexInterval).
	IndexInterval int
	// SkipCorrupt opens a log even when a record before its tail is damaged.
	// The damaged byte range is skipped: the sequence numbers it held are
	// lost, Read returns ErrCorrupt for them, Scan passes over them, and
	// Log.Recovery lists them. Without it Open fails with a *CorruptError.
	// A sealed segment's index then records the ranges lost, so later
	// opens need SkipCorrupt only for new damage.
	SkipCorrupt bool
	// Verify makes Open read and check every record of every segment
	// (header and data checksums, numbering), not only the tail it must
	// scan: damage done while the log was closed then fails Open with a
	// *CorruptError (or is skipped with SkipCorrupt) instead of being
	// found by the reader that reaches it. It costs a read of the whole
	// log (compressed segments are decompressed once each).
	Verify bool
	// QuickVerify (with Verify) checks only the segments no earlier
	// Verify-ing Open checked: a mark in the LOCK file says up to which
	// segment they were (durablehint.go), so restarts read only what is
	// new. Damage done since to a segment checked before is then found by
	// VerifySegments (a scrub) or by the reader that meets it, not by
	// Open. A lost mark checks everything again.
	QuickVerify bool
	// ReadOnly opens the log to look, never to change it: files are opened
	// read-only, nothing is created, cut, zeroed, rewritten or removed
	// (a torn tail is reported in Recovery but left in place, indexes are
	// rebuilt in memory only), no compressor runs, and every write fails
	// with ErrReadOnly. The directory lock is taken shared, so a log open
	// for writing elsewhere fails with ErrLocked. With SkipCorrupt it
	// lists in Recovery every damaged range an Open would meet: what
	// `fibril verify` reports.
	ReadOnly bool
	// FS is the file system the log uses; nil means the operating system's.
	// Tests pass internal/crashfs to inject crashes and I/O errors.
	FS FS
	// Compression, when set, makes a background goroutine compress each
	// sealed segment (never the active one) with that codec, keeping it
	// plain when that would not save at least 10 %. Default
	// CompressionNone: reads from compressed segments decompress a whole
	// segment (see the package Caveats). A log opened with any setting
	// reads segments compressed by an earlier Open.
	Compression Compression
	// HoldSwapped keeps the plain map of a segment the compressor replaced
	// until ReleaseSwapped says no reader borrows it any more, instead of
	// until the next TruncateFront. For owners whose borrowed records can
	// outlive a TruncateFront (the broker's deliveries wait for an fsync).
	HoldSwapped bool
	// Start is the sequence number the first record of a new log gets
	// (default 1): a log made as the copy of another whose front was
	// truncated keeps its numbers. A directory that holds segments goes
	// on from them and ignores it.
	Start Seq
	// NoRecycle deletes every segment TruncateFront drops (gradually, see
	// trash.go). By default up to two full-size plain segments are kept as
	// spare files and reused, old bytes and all, by the next rolls (see
	// recycle.go): on ext4 freeing a segment's blocks stalled the log's
	// fsyncs for tens of milliseconds, and fsyncs into written blocks cost
	// less than into newly allocated ones. Spares hold disk
	// space (two segments at most) that Segments does not list.
	NoRecycle bool

	// writeViaMap copies records into a writable map instead of pwrite
	// (kept for the benchmark that chose pwrite; see BENCHMARKS.md).
	writeViaMap bool
	// compressHook, for crash tests, is called at each step of
	// compressing a segment; returning true stops the compression there
	// as if the process had died.
	compressHook func(step string) bool
}

// withDefaults returns a copy of o with defaults filled in, or an error
// wrapping ErrInvalidOptions.
func (o Options) withDefaults() (Options, error) {
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.IndexInterval == 0 {
		o.IndexInterval = DefaultIndexInterval
	}
	if o.FS == nil {
		o.FS = osFS{}
	}
	switch {
	case o.SegmentSize < MinSegmentSize || o.SegmentSize > MaxSegmentSize:
		return o, fmt.Errorf("%w: SegmentSize %d outside [%d, %d]", ErrInvalidOptions, o.SegmentSize, MinSegmentSize, MaxSegmentSize)
	case o.SegmentSize%8 != 0:
		return o, fmt.Errorf("%w: SegmentSize %d is not a multiple of 8", ErrInvalidOptions, o.SegmentSize)
	case o.IndexInterval < 0:
		return o, fmt.Errorf("%w: negative IndexInterval %d", ErrInvalidOptions, o.IndexInterval)
	case o.Policy > PolicyNone:
		return o, fmt.Errorf("%w: unknown Policy %d", ErrInvalidOptions, o.Policy)
	case o.Compression > CompressionZstd:
		return o, fmt.Errorf("%w: unknown Compression %d", ErrInvalidOptions, o.Compression)
	}
	return o, nil
}

// String returns the policy's name: "sync", "caller" or "none".
func (p Policy) String() string {
	switch p {
	case PolicySync:
		return "sync"
	case PolicyCaller:
		return "caller"
	case PolicyNone:
		return "none"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// ParsePolicy maps "sync" (or ""), "caller" or "none" to a Policy.
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "sync", "":
		return PolicySync, nil
	case "caller":
		return PolicyCaller, nil
	case "none":
		return PolicyNone, nil
	}
	return 0, fmt.Errorf("%w: unknown durability policy %q", ErrInvalidOptions, s)
}
