// Package vfs holds the file-system contract a seglog.Log works on: the FS
// and File interfaces, and nothing else. It is a leaf so that a file system
// implemented outside seglog (the crash-simulating one the tests use,
// internal/crashfs) can satisfy seglog.FS without importing seglog.
// seglog.FS and seglog.File are aliases of these types; the operating
// system's implementation is seglog.OSFS.
package vfs

import (
	"io"
	"os"
)

// FS is the file system a log works on. Paths are passed through
// unchanged. Implementations must be safe for concurrent use.
type FS interface {
	// OpenFile opens a file like os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove deletes a file.
	Remove(name string) error
	// Rename renames a file atomically.
	Rename(oldpath, newpath string) error
	// ReadDir lists the names of the entries of dir, sorted.
	ReadDir(dir string) ([]string, error)
	// MkdirAll creates dir and its parents.
	MkdirAll(dir string, perm os.FileMode) error
	// SyncDir makes creations, removals and renames inside dir durable.
	SyncDir(dir string) error
}

// File is an open file of an FS.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Sync makes the file's data durable (fdatasync).
	Sync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Allocate reserves disk blocks for [off, off+size) and extends the file
	// to cover it (fallocate); it fails with ENOSPC on a full disk.
	Allocate(off, size int64) error
	// Size returns the file's current size.
	Size() (int64, error)
	// Fd returns the descriptor, used for mmap and flock.
	Fd() uintptr
	// Close closes the file.
	Close() error
}
