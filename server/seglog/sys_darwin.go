package seglog

// macOS, for development machines (the package Caveats: Linux-first).

import "golang.org/x/sys/unix"

// fdatasync makes a file's data durable: F_FULLFSYNC, as fsync alone
// leaves the data in the drive's cache on macOS.
func fdatasync(fd int) error {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_FULLFSYNC, 0)
	return err
}

// fallocate reports EOPNOTSUPP: the caller then extends the file instead
// (a full disk shows on write rather than here).
func fallocate(int, int64, int64) error { return unix.EOPNOTSUPP }

// dropCache does nothing on macOS (no fadvise): a check may then read
// cached pages rather than the disk.
func dropCache(int) {}
