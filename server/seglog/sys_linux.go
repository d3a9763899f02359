package seglog

import "golang.org/x/sys/unix"

// fdatasync makes a file's data durable (not its timestamps).
func fdatasync(fd int) error { return unix.Fdatasync(fd) }

// fallocate reserves disk blocks for [off, off+size) and extends the file.
func fallocate(fd int, off, size int64) error { return unix.Fallocate(fd, 0, off, size) }

// dropCache advises the kernel to drop a file's clean pages from the page
// cache (advice only: errors are ignored).
func dropCache(fd int) { _ = unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED) }
