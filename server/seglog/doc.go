// Package seglog is Fibril's durable storage: an append-only log of records
// split into segment files, memory-mapped for reading, with crash
// recovery. It is reusable on its own and knows nothing of topics,
// queues or the wire protocol.
//
// The package owns the bytes of one log directory: segment files named
// %020d.seg by their first sequence number, their sparse index files
// (%020d.idx), compressed sealed segments (%020d.seg.s2, %020d.seg.zst),
// keep-plain markers (%020d.seg.plain), spare segment files
// (%d.spare.tmp), trash files being deleted (%d.trash.tmp), the
// clean-shutdown marker (CLEAN) and the directory lock
// (LOCK, held with flock while the log is open; it also holds the
// durable-point hint and the front hint, durablehint.go). It must never report a
// record durable before its bytes are on disk under the log's Policy, never
// return damaged bytes as data, and never kill the process on an I/O
// problem (a full disk, a file shrunk behind its back): those are errors
// returned to the caller.
//
// The Store interface fixes the contract, capabilities included: side
// records (SideRecords says whether a store keeps them) and the release of
// held maps (SwapCount, ReleaseSwapped) are methods every store has, so a
// wrapper keeps them and an owner checks them once instead of looking for
// optional interfaces. *Log (Open) is the file-backed implementation, with
// both, and *MemStore (NewMemStore) the in-memory one, with neither, a
// feature (queue.Memory and queue.OpenMemory keep queues in it), not a
// test fake.
// The file system a Log works on is Options.FS (the vfs.FS contract;
// OSFS by default); the crash tests pass internal/crashfs, which simulates
// power cuts and injects I/O errors.
//
// Inside, a Log is built from small owned parts (the segment list, the
// writer, what is known durable, the LOCK file, the segments that left
// the log and their release, the read cursors, the compressor, spares and
// trash), each with its own file and tests; the Log type's comment lists
// them and the order its locks are taken in.
//
// # Layout and life of a log
//
// A new log's first segment is preallocated with fallocate to 16 KiB, a
// segment started by a roll to 1 MiB (either at most SegmentSize), and its
// allocation doubles, again with fallocate, whenever an append would pass
// the allocated end, up to Options.SegmentSize; so a log with few records
// holds 16 KiB of disk, not a whole segment. Each segment
// reserves SegmentSize of address space once (no memory) and the file is
// mapped read-only into it as it grows, so mapped records never move and
// nothing is mapped past the end of the file; the growth happens before the
// write, so a full disk is an append error, never a SIGBUS. Appends are
// encoded into one buffer and written with one pwrite per segment touched
// (pwrite measured faster than copying into a writable map, see
// BENCHMARKS.md). A record is a 32-byte header (header CRC, data length,
// sequence number, timestamp, flags, meta length, data CRC), the meta and
// the data, padded to 8 bytes. The data CRC is CRC-32 IEEE, the checksum
// the wire protocol carries, and Record.CRC returns it. When a segment is
// full it is fsynced, its sparse index (sequence number → offset, one entry
// per Options.IndexInterval bytes) is written beside it, and a new segment
// starts.
//
// Durability: one owner decides when to fsync, per the Policy. PolicySync
// (the default) fsyncs (fdatasync) inside Append. PolicyCaller leaves it to
// the caller: Append only writes, Sync fsyncs the active segment (it runs
// beside Append, so one writer can keep writing while an earlier batch
// syncs, which is how the broker pipelines its commits), and the log
// fsyncs on its own only to seal a segment at a roll and at Close.
// PolicyNone is PolicyCaller plus a background fsync once Append wrote
// 8 MiB since the last one (so a roll never has a whole segment to flush).
// Durable reports the highest sequence number known to be on disk; the
// log has no group commit of its own. Segments lists the segment files
// for retention.
//
// TruncateFront drops whole segments, oldest first. Up to two full-size
// plain segments it drops are kept as spare files (%d.spare.tmp) instead
// of unlinked, and renamed to the next segments at rolls once their maps
// are released, their old bytes left in place (Options.NoRecycle turns
// this off; see recycle.go for why): every old record in a spare is
// numbered below the segment it becomes, so recovery never takes it for
// one of that segment's. Open deletes spares a crash left, Close its own.
// The others (and the plain file of a segment the compressor replaced) are
// renamed to trash files and deleted gradually once their map is released:
// shrunk a few MiB at a time, then unlinked (see trash.go for why).
//
// Recovery: Open rebuilds everything from the files. Sealed segments are
// taken from their index files (a missing or damaged index is rebuilt by a
// verifying scan). The last segment is scanned from its last good index
// point unless the clean-shutdown marker written by Close vouches for its
// index (and no intact record follows the end the index names); the
// marker stays in place until the first write after Open, which removes
// it durably first, so a log opened and closed without writes costs no
// fsync. Open fsyncs only when it must: the recovered tail after an
// unclean shutdown. Directory entries (a new segment, the log directory
// in its parent) are synced before the first record in them is reported
// durable, not when they are created. Index and marker files are written
// without fsync: they are checksummed hints whose loss costs a scan. Each
// record header carries a durable hint (how far below it the log was
// durable when it was written, record.go), and after every fsync the log
// writes its durable point into the LOCK file without syncing it
// (durablehint.go). In the last segment a damaged record is a torn write
// when nothing intact follows it, or when no later record's hint claims it
// durable (for records older than hints: when part of a disk sector before
// the next intact record was never written, zero); a damaged or missing
// record at or below the LOCK file's durable point is corruption. A torn
// tail is zeroed (its header and every record numbered past the recovered
// ones) and Recovery reports the cut. A failed write's leftovers are zeroed
// and synced before anything is written over them, so stale bytes never
// mix with new ones after a crash.
// A last segment whose creation never reached the disk is removed, and
// numbering goes on from its name, never from 1, even when truncation left
// no other segment: a sequence number is never handed out twice. Any other
// damage is corruption: Open fails with a *CorruptError naming the file and offset,
// or, with Options.SkipCorrupt, skips the damaged range (Recovery.Skipped
// lists it, Read returns ErrCorrupt for the sequence numbers it held).
// With Options.Verify, Open also reads and checks every record of every
// segment (verify.go), so damage done while the log was closed is found
// at Open, not by the reader that reaches it; VerifySegments does the
// same on an open log, segment by segment, for a background scrub. A
// read that meets a damaged record on its way from an index point steps
// over it to the next intact one: damage costs the damaged records only.
// TruncateFront records the log's new front in the LOCK file (fsynced)
// before it removes a segment, so segment files missing from the front
// are corruption too, not retention. Options.ReadOnly opens a log to look
// without changing a byte (readonly.go): with Verify and SkipCorrupt its
// Recovery lists every damaged range an Open would meet.
//
// # Side records
//
// AppendSide (side.go) writes a side record: bytes of the caller's that
// take no sequence number, become durable with the log's next fsync (Sync covers them; DurableSide says how far), are never
// returned by Read or Scan, and are read back with ScanSide, each tagged
// with the number of the record after it. The broker uses them to make a
// round's consumer events durable with the data fsync that confirms its
// messages. A side record is written only into the active segment after a
// record of it and never starts a segment (ErrSideNoRoom). Recovery checks
// side records like records and keeps them; versions before side records
// cannot open a log holding one.
//
// # Compression
//
// With Options.Compression (s2 or zstd; default none) a goroutine per log,
// woken at each segment roll and stopped by Close, compresses sealed
// segments one at a time, oldest first. The compressed file holds a
// checksummed header (first and last sequence numbers, plain length and
// the CRC-32 of the plain bytes) and the codec's encoding of the plain
// segment, so every record keeps its own CRCs. It is written crash
// safely: a temporary file, fsync, rename to %020d.seg.s2 (or .zst),
// directory fsync, and only then the plain file and its index are removed.
// Open deletes a leftover temporary file and, if both forms of a segment
// exist, keeps the plain one and deletes the compressed one. A segment
// that would not shrink by at least 10 % stays plain, and a
// %020d.seg.plain marker says so (a hint: losing it costs a retry).
// Segments with ranges skipped as damaged are never compressed. Reads
// from a compressed segment decompress it whole, check its length and
// checksum and index it, into a cache of the last 2 segments; Scan,
// Read, TruncateFront and Segments (SegmentInfo.Compressed) work across
// plain and compressed segments alike. A log opened without Compression
// still reads the segments an earlier Open compressed.
//
// # Caveats
//
//   - Record.Meta and Record.Data returned by Read and Scan point into a
//     memory map. They are valid until the next TruncateFront or Close:
//     copy what must live longer (a delivery queued to a socket, say).
//     Using them after the segment was deleted and unmapped crashes the
//     process; TruncateFront keeps the last removed segments mapped until
//     the following TruncateFront as a margin, not as a promise.
//   - Bounds and Read include records that are written but not yet durable;
//     compare with Durable before acting on durability.
//   - After a failed fsync every later Append and Sync fails with
//     ErrSyncFailed: the kernel may have dropped the pages, so retrying
//     cannot be trusted. Close and Open again; recovery then keeps what is
//     really on disk.
//   - A failed write or preallocation (a full disk) returns ErrWriteFailed
//     and leaves the log as it was; the next Append first zeroes what the
//     failed write may have left. If the process dies before that, records
//     of the failed batch may survive on disk and be read after reopening:
//     they were never reported durable, but they are not invented either.
//   - A batch larger than a segment is written in several pieces; if a
//     later piece fails, the earlier pieces stay in the log.
//   - The damaged final record of the log looks exactly like a torn write,
//     so after an unclean shutdown it is cut (and reported in Recovery),
//     not refused. Likewise a damaged record of the last segment passes for
//     torn when the damaged range (up to the next intact record) holds 8 or
//     more zero bytes, 8-aligned, filling its share of a 512-byte disk
//     sector: that is what a page the disk never wrote looks like, and
//     data with such zero runs cannot be told from it. Reads always verify
//     checksums, so damage is never returned as data.
//   - The log shares no fsync between callers: under PolicySync each
//     Append pays one, and concurrent Syncs each fsync. A writer that
//     wants fewer batches its entries, or uses PolicyCaller and syncs
//     when it chooses (on another goroutine, beside its next Appends).
//   - The sparse index lives in memory: 16 bytes per IndexInterval of data
//     (0.4 % at the default 4 KiB); raise IndexInterval for huge logs.
//   - Reads go through the memory map, so what a reader touches counts in
//     the process's RSS (as file pages the kernel may reclaim). As readers
//     move forward, the pages they have passed are dropped from the RSS
//     (madvise), 1 MiB at a time within a segment and a sealed segment's
//     rest when its last reader moves on; up to four readers reading at
//     different places (consumer groups) are told apart (readcursor.go). A
//     later read faults dropped pages back in.
//   - TruncateFront deletes whole segments only, never the active one;
//     Bounds tells the first sequence number really retained. The
//     directory fsync that makes the deletion durable runs in the
//     background (a crash before it may bring the dropped segments back;
//     the next truncation drops them again); its failure is returned by
//     the next TruncateFront or Close.
//   - Sealed segments keep the size they had grown to (up to SegmentSize)
//     even when the last record did not fill them.
//   - Each open segment holds a SegmentSize range of address space (not
//     memory): 17 segments of 64 MiB per GiB of log.
//   - A damaged sealed segment opened with SkipCorrupt gets an index that
//     records the ranges lost, so later opens take it as recovered then,
//     without SkipCorrupt; Recovery.Skipped lists those ranges again with
//     Recorded set. Deleting that index file brings the damage back to
//     light (the segment is scanned and SkipCorrupt is needed again). In
//     the last (active) segment this holds once its index is written, at
//     a roll or a clean Close.
//   - Directory operations (create, rename, remove) count as durable at
//     once in internal/crashfs; crash tests cover lost file data, not lost renames.
//   - The log syncs its own directory and that directory's entry in its
//     parent; directories above the parent are the caller's to sync.
//   - Compression is off by default because it costs the zero-copy read
//     path: the first read from a compressed segment decompresses all of
//     it (about 7-13 ms for a 4 MiB segment here, BENCHMARKS.md), holding
//     the log's read lock, which delays a segment roll or TruncateFront
//     meanwhile. Reads that jump between more segments than the cache
//     holds (2) pay that on every read. Use it for logs kept long and
//     read rarely, with compressible payloads. Each cached segment is
//     held in memory: up to 2 × SegmentSize per log.
//   - Records read from a compressed segment point into heap memory, not
//     a map, so they stay valid as long as they are referenced.
//   - Once a segment is compressed its plain file is renamed to the trash
//     but stays mapped until the next TruncateFront (any argument) or Close, because
//     records read from it earlier are borrowed until then: its disk space
//     is freed only at that point, while Segments already reports the
//     compressed size. With Options.HoldSwapped it stays until the owner
//     says, with ReleaseSwapped, that no reader borrows from it (SwapCount
//     tells a reader which replacements it may borrow from).
//   - Without Options.Verify, damage inside a compressed segment is found
//     when it is read, not by Open (which checks only its header): every record of that segment
//     then reads as ErrCorrupt, and SkipCorrupt does not skip it. A
//     damaged header makes Open fail with a *CorruptError.
//   - TruncateFront and Close wait while a segment is being compressed
//     (at most one segment's compression: about 0.3 s for 64 MiB with s2,
//     1-2 s with zstd, from the BENCHMARKS.md speeds).
//   - Durable points and their hints count records, not side records: a
//     damaged side record that no later record's hint vouches for passes
//     for a torn write (and is cut), even if a Sync had covered it.
//   - The front hint is kept only by this version on: a log whose LOCK
//     file is lost (or written before the hint) cannot tell segments
//     deleted from its front from retention, until its next Open or
//     TruncateFront records the front again.
//   - TruncateFront fsyncs the LOCK file once before removing segments
//     (the front hint), on the caller's goroutine.
//   - The log is Linux-first: fallocate, fdatasync, mmap and flock come from
//     golang.org/x/sys/unix. It builds on macOS for development machines
//     (sys_darwin.go): F_FULLFSYNC stands in for fdatasync, nothing is
//     preallocated, and a lock error cannot name the process holding it.
package seglog
