package seglog

// This file fixes the contract between the log and its users (the broker engine
// above all). Implementations: the file-backed *Log (the default) and the
// in-memory *MemStore; the tests' fault-injecting stores (internal/memstore)
// are built on MemStore.

// Seq is a record's sequence number within one log. The first record ever
// appended to a log gets 1; sequence numbers are never reused, even after the
// records that held them have been truncated away. 0 means "none".
type Seq uint64

// Entry is one record to append. The log copies what it needs; the caller may
// reuse Meta and Data once Append returns.
type Entry struct {
	// Meta is small caller-defined metadata (the broker keeps the subject and
	// header length there). It is covered by the record header's checksum.
	Meta []byte
	// Data is the record body. Its CRC-32 (IEEE) is stored with it and checked
	// on every read, so a corrupt body is reported, never returned.
	Data []byte
	// Time is the record's timestamp in Unix nanoseconds; 0 means "now".
	Time int64
	// CRC, when non-zero, is the CRC-32 (IEEE) of Data as the caller
	// already computed it (a broker verifying a producer's checksum): the
	// log stores it instead of computing it again. A wrong value is never
	// harmful: every read checks it, so the record reads as corrupt. Zero
	// means "compute it" (data whose CRC is 0 just costs the computation).
	CRC uint32
}

// Record is one stored record as read back.
type Record struct {
	Seq  Seq
	Time int64
	Meta []byte
	Data []byte
	// CRC is the CRC-32 (IEEE) of Data, as stored and verified on read. It is
	// the same value the wire protocol carries, so a checksum travels from
	// producer to disk to consumer unchanged.
	CRC uint32
}

// Policy says who makes appended records durable, and when.
type Policy uint8

const (
	// PolicySync (the default): every Append fsyncs before it returns.
	// Appends are serialized, so each pays its own fsync: batch entries
	// into one Append to share it.
	PolicySync Policy = iota
	// PolicyCaller: the caller syncs. Append returns after the write; the
	// caller makes the records durable with Sync, which may run beside the
	// next Append, and Durable says how far that went. The log fsyncs on
	// its own only to seal a segment at a roll and at Close. The broker's
	// commit pipeline opens its logs so: it alone decides when to fsync.
	PolicyCaller
	// PolicyNone: nobody waits for durability. Append returns after the
	// write; the file-backed Log fsyncs in the background every 8 MiB
	// appended (so a roll never has a whole segment to flush), at each
	// roll and at Close. Sync works as under PolicyCaller.
	PolicyNone
)

// Store is the interface every log implementation satisfies.
//
// Concurrency: all methods are safe for concurrent use. Append calls are
// serialized internally; Sync may run concurrently with Append.
//
// Copying: Append must not keep the entries' Meta or Data past its return;
// callers reuse those buffers at once (the broker recycles message bodies).
//
// Borrowing: Record.Meta and Record.Data returned by Read and Scan may point
// into the store's memory (a memory map). They stay valid until the next
// TruncateFront or Close on the same store; copy them to keep them longer
// (a store opened with Options.HoldSwapped keeps replaced maps until
// ReleaseSwapped instead).
//
// Capabilities are methods, not optional interfaces: a wrapper that embeds
// a Store keeps them, and a store without side records or held maps says
// so (SideRecords, SwapCount) instead of lacking a method an owner would
// look for at run time.
type Store interface {
	// Append writes entries as one batch and returns the sequence number given
	// to the first one (the rest follow consecutively). It returns once the
	// batch is as durable as the store's Policy says. On error nothing of the
	// batch is reported durable, and the store stays consistent: a later
	// Append may succeed (for example once disk space returns).
	Append(entries []Entry) (first Seq, err error)

	// Sync makes every record appended before the call durable and returns the
	// highest durable sequence number. It may run beside Append (a caller
	// writes the next batch while the last one syncs). After a failed fsync
	// the store never reports the un-synced records as durable: it returns
	// an error from then on (see ErrSyncFailed).
	Sync() (Seq, error)

	// Durable returns the highest sequence number known to be on disk.
	Durable() Seq

	// Bounds returns the first retained and the last appended sequence
	// numbers. An empty store has first == last+1 (for a new store 1 and 0).
	Bounds() (first, last Seq)

	// Read returns the record with sequence number seq, or an error wrapping
	// ErrNotFound if it was truncated away or not yet written, or ErrCorrupt
	// if its checksum does not match.
	Read(seq Seq) (Record, error)

	// Scan calls fn for each record from seq onwards, in order, until fn
	// returns false, maxBytes of record data have been passed (at least one
	// record is always passed), or the end of the log. It returns the first
	// error it met.
	Scan(from Seq, maxBytes int, fn func(Record) bool) error

	// TruncateFront discards records below seq. Implementations may keep some
	// of them (a file log deletes only whole segments); Bounds reports what
	// remains. It never discards a record at or above seq.
	TruncateFront(seq Seq) error

	// Close flushes, syncs and releases the store. A second Close returns nil.
	Close() error

	// SideRecords reports whether the store keeps side records (side.go),
	// fixed for its life: an owner checks it once, at open. When false,
	// AppendSide fails with an error wrapping errors.ErrUnsupported,
	// DurableSide returns 0 and ScanSide passes nothing.
	SideRecords() bool
	// AppendSide writes e as a side record after everything written so
	// far and returns its mark (1 for the first of this open, then 2, ...).
	// It never waits for durability: Sync covers it, and DurableSide says
	// how far that went. Errors: ErrSideNoRoom (nothing written), and
	// those of Append.
	AppendSide(e Entry) (mark uint64, err error)
	// DurableSide returns the highest side mark known to be on disk.
	DurableSide() uint64
	// ScanSide calls fn for each side record whose Seq (the number of the
	// record after it) is at least from, in the order written, until fn
	// returns false or the log ends. Records are borrowed as from Scan.
	ScanSide(from Seq, fn func(Record) bool) error

	// SwapCount returns how many segments the store replaced (compressed)
	// while it keeps their old maps for borrowers (Options.HoldSwapped);
	// a store that never holds one returns 0.
	SwapCount() uint64
	// ReleaseSwapped says no record read from the first upto replaced
	// segments is borrowed any more, so their old maps may go; a store
	// that holds none ignores it.
	ReleaseSwapped(upto uint64)
}
