package seglog

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/fibrilmq/fibril/server/seglog/vfs"
)

// FS is the file system a Log works on (see vfs.FS). The default is the
// operating system's (OSFS); tests pass a crash-simulating one
// (internal/crashfs) as Options.FS.
type FS = vfs.FS

// File is an open file of an FS (see vfs.File).
type File = vfs.File

// OSFS returns the operating system's file system, the default of
// Options.FS: Sync is fdatasync and Allocate is fallocate, both retried on
// EINTR. It is for FS implementations that wrap the real one.
func OSFS() FS { return osFS{} }

// osFS is the operating system's file system.
type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error {
	return os.MkdirAll(dir, perm)
}

func (osFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

type osFile struct{ f *os.File }

func (o osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o osFile) Fd() uintptr                              { return o.f.Fd() }
func (o osFile) Close() error                             { return o.f.Close() }

func (o osFile) Sync() error {
	for {
		err := fdatasync(int(o.f.Fd()))
		if !errors.Is(err, unix.EINTR) {
			return wrapOS("fdatasync", o.f.Name(), err)
		}
	}
}

func (o osFile) Allocate(off, size int64) error {
	for {
		err := fallocate(int(o.f.Fd()), off, size)
		if errors.Is(err, unix.EOPNOTSUPP) {
			// File systems without fallocate (tmpfs on old kernels): fall back
			// to extending the file; a full disk then shows on write instead.
			cur, serr := o.Size()
			if serr != nil {
				return serr
			}
			if off+size > cur {
				return o.f.Truncate(off + size)
			}
			return nil
		}
		if !errors.Is(err, unix.EINTR) {
			return wrapOS("fallocate", o.f.Name(), err)
		}
	}
}

func (o osFile) Size() (int64, error) {
	st, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func wrapOS(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", op, path, err)
}
