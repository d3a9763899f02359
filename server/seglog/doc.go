// Package seglog is Fibril's durable storage: an append-only log of records
// split into segment files, memory-mapped for reading, with group commit and
// crash recovery. It is reusable on its own and knows nothing of topics,
// queues or the wire protocol.
//
// The package owns the bytes of one log directory: segment files named
// %020d.seg by their first sequence number, their sparse index files
// (%020d.idx), the clean-shutdown marker and the directory lock. It must
// never report a record durable before its bytes are on disk under the
// log's Policy, never return damaged bytes as data, and never kill the
// process on an I/O problem (a full disk, a truncated file): those are
// errors returned to the caller.
//
// The Store interface fixes the contract; *Log is the file-backed
// implementation, *MemStore the in-memory one, and *FaultFS a file system
// that injects crashes and I/O errors for tests.
//
// # Caveats
//
// (filled in below as the implementation lands)
package seglog
