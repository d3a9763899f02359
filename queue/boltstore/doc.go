// Package boltstore keeps seglog logs in a bbolt database
// (go.etcd.io/bbolt): one file holding many logs, so a program that already
// ships bbolt keeps its queues' messages beside its own data. A *Storage is
// what queue.Options.Storage takes:
//
//	st, err := boltstore.Open("/var/lib/myapp/app.db")  // or boltstore.New(db)
//	defer st.Close()                                    // after the queue DB
//	db, err := queue.Open("/var/lib/myapp/queues", queue.Options{Storage: st})
//
// # Layout
//
// Every log lives in a bucket named after it, nested in the root bucket
// "fibril.logs". A record's key is its sequence number, 8 bytes big-endian,
// so key order is sequence order; its value is
//
//	header CRC-32C (4) | data CRC-32 (4) | time (8) | meta length (2) | meta | data
//
// with the header CRC covering the sequence number too (a value moved under
// another key reads as corrupt). A log's bounds are not stored: on open the
// first and last sequence numbers are the bucket's first and last keys, as
// the persistent-queue design derives its cursors. The one exception is the
// one-byte key 0x00, the truncation floor TruncateFront writes with its
// deletions, so a log truncated empty still never reuses a number. The root
// bucket's key "\x00version" holds the format (1); a newer one is refused.
//
// # Durability: what bbolt's commit means for each policy
//
// A bbolt read-write transaction commits by writing its pages, fdatasync,
// writing the meta page, fdatasync: once Commit returns, the transaction
// survives a process crash and a power cut (unless the DB was opened with
// NoSync, which voids every promise below). bbolt has one writer at a time,
// so the Storage runs one commit at a time itself and puts into it every
// log's pending appends and truncations: a commit is a group commit across
// all the logs of the file.
//
//   - seglog.PolicySync: Append returns once a commit holding its batch
//     returned. Appends and Syncs arriving during a commit share the next
//     one; one Append alone costs one commit.
//   - seglog.PolicyCaller and seglog.PolicyNone: Append copies the batch
//     into memory and returns.
//     The batch is committed by the log's next Sync or Close, by any commit
//     another log of the file asks for, by the background flush every 100
//     ms, or at once when 8 MiB are pending. Until then a crash of the
//     process loses it (the segment log loses unsynced records only to a
//     power cut: they sit in the page cache, these in the heap). The queue
//     runs its group and sync durability this way, calling Sync for each
//     commit (the broker passes PolicyCaller).
//
// Durable is the last record committed; Sync commits and returns it. A
// failed commit (a full disk, an I/O error) is rolled back by bbolt, and
// every log it held fails every later Append and Sync with an error
// wrapping seglog.ErrSyncFailed until it is opened again.
//
// # What it owns, what it must never do
//
// The package owns the root bucket "fibril.logs" and everything in it, and
// the commits it makes; it never reads or writes another bucket of the
// file, and never closes a *bolt.DB given to New. It must never report a
// record durable before bbolt committed it, never hand out a record whose
// checksum fails (Read and Scan return an error wrapping seglog.ErrCorrupt
// naming the file, the log and the sequence number), and never reuse a
// sequence number.
//
// # Caveats
//
//   - Reads copy: a record's Meta and Data are the reader's own, never
//     borrowed from bbolt's map. Each Read is a bbolt read transaction.
//   - TruncateFront drops exactly the records below its argument at once
//     for readers, and on disk at the next commit: a crash before it may
//     bring them back (they are never below what the caller settled).
//     Deleting many keys costs a commit that rewrites their pages; bbolt's
//     file does not shrink, it reuses its free pages.
//   - A log is opened at most once at a time (OpenLog fails otherwise).
//     Another process cannot open the file while this one holds it (bbolt's
//     flock): Open waits up to 1 s, then fails.
//   - A long read transaction of your own on the same DB keeps bbolt from
//     growing its map; a commit that needs to waits for it.
//   - Records of one log are limited by bbolt's value size (2 GiB) and Meta
//     by seglog.MaxMetaSize.
package boltstore
