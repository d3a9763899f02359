// Package faultfs owns a fault-injecting FUSE file system for durability
// tests: a passthrough over a backing directory (hanwen/go-fuse v2's
// loopback) that remembers, for every file, what an fsync has made durable
// and what has been written since, so that a "power cut" can put every file
// back to its last fsynced state; and that fails fsync or writes with an
// errno (EIO, ENOSPC) on command.
//
// How unsynced writes are kept: writes go through to the backing file at
// once (reads, and mmap, see them, as on a real disk's page cache), but
// before a block (4 KiB) of a file is first changed after its last fsync
// its old bytes are saved in memory (a block of zeros costs nothing), and
// the file's size at its last fsync is kept. PowerCut writes the saved
// blocks back and truncates each file to its synced size, then forgets
// them; Fsync (and fdatasync) of a file forgets its saved blocks and
// records its size. The saved bytes are bounded (Options.MaxUnsynced): a
// write that needs more fails with EIO and is counted in Stats.Refused.
//
// Control: the methods of FS in process, or Serve's line protocol on a
// socket (cmd/fibril-faultfs): powercut, fail-sync ERRNO, fail-write ERRNO,
// heal, stats.
//
// It must never touch files outside its backing directory, never let a
// write bypass the tracking (kernel passthrough and copy_file_range are
// refused), and never report an fsync as done when it failed.
//
// # Caveats
//
//   - Mounting needs root (it calls mount(2) itself; fusermount is not
//     used) and /dev/fuse.
//   - Name-space operations (create, rename, unlink, mkdir) and truncates
//     that shrink a file are durable at once: a power cut does not bring
//     back a removed file or undo a rename. A journaling file system may
//     lose them; this one never does.
//   - PowerCut rewrites the backing files, not the kernel's page cache of
//     the mount: stop every process using the mount first (SIGKILL), and
//     Unmount and Mount again before anything reads it (the runner does).
//   - Files are not opened with direct_io: the kernel caches pages, which
//     is what lets the broker mmap segment files for reads (MAP_SHARED over
//     a direct_io FUSE file fails with ENODEV: go-fuse does not negotiate
//     FUSE_DIRECT_IO_ALLOW_MMAP; TestMmapOverDirectIO). Writes are
//     write-through (no writeback cache), so each pwrite reaches the file
//     system before it returns.
//   - A failed fsync (FailSync) keeps the unsynced writes unsynced; it does
//     not drop them as Linux may after a real write-back error.
package faultfs
