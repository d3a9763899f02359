package faultfs

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Options configures a mount.
type Options struct {
	// MaxUnsynced bounds the old bytes kept for unsynced writes (default
	// 256 MiB); a write needing more fails with EIO.
	MaxUnsynced int64
	// Debug logs every FUSE request on stderr.
	Debug bool

	// directIO opens files with FOPEN_DIRECT_IO, to show what it breaks
	// (TestMmapOverDirectIO).
	directIO bool
}

// FS is one mounted fault-injecting file system.
type FS struct {
	Backing, Mountpoint string

	opts   Options
	t      *tracker
	server *fuse.Server
}

// Available reports why FUSE cannot be mounted here, or nil: it needs
// /dev/fuse and root.
func Available() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("faultfs: no /dev/fuse: %w", err)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("faultfs: mounting needs root (euid %d)", os.Geteuid())
	}
	return nil
}

// Mount serves backing at mountpoint (both existing directories) until
// Unmount. It returns once the mount is ready.
func Mount(backing, mountpoint string, opts Options) (*FS, error) {
	if opts.MaxUnsynced == 0 {
		opts.MaxUnsynced = 256 << 20
	}
	f := &FS{Backing: backing, Mountpoint: mountpoint, opts: opts, t: newTracker(opts.MaxUnsynced)}
	if err := f.mount(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FS) mount() error {
	root, err := fs.NewLoopbackRoot(f.Backing)
	if err != nil {
		return fmt.Errorf("faultfs: %s: %w", f.Backing, err)
	}
	lb := root.(*fs.LoopbackNode)
	top := &node{LoopbackNode: lb, fs: f}
	lb.RootData.RootNode = top
	zero := time.Duration(0)
	server, err := fs.Mount(f.Mountpoint, top, &fs.Options{
		// No attribute or entry caching: after a power cut and remount the
		// kernel must ask again.
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true, // root calls mount(2); there may be no fusermount
			FsName:            "faultfs:" + f.Backing,
			Name:              "faultfs",
			AllowOther:        true,
			Debug:             f.opts.Debug,
		},
	})
	if err != nil {
		return fmt.Errorf("faultfs: mounting %s on %s: %w", f.Backing, f.Mountpoint, err)
	}
	if err := server.WaitMount(); err != nil {
		_ = server.Unmount()
		return fmt.Errorf("faultfs: waiting for the mount: %w", err)
	}
	f.server = server
	return nil
}

// Unmount ends the mount. Files still open on it make it fail (EBUSY),
// retried for a few seconds.
func (f *FS) Unmount() error {
	if f.server == nil {
		return nil
	}
	var err error
	for range 50 {
		if err = f.server.Unmount(); err == nil {
			f.server = nil
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("faultfs: unmounting %s: %w", f.Mountpoint, err)
}

// Remount unmounts and mounts again, so that the kernel forgets every
// cached page and attribute (after a PowerCut).
func (f *FS) Remount() error {
	if err := f.Unmount(); err != nil {
		return err
	}
	return f.mount()
}

// PowerCut drops every write not yet fsynced: files get back the bytes and
// size they had at their last fsync. Stop the processes using the mount
// first, and Remount before reading it (see the package caveats).
func (f *FS) PowerCut() error { return f.t.powerCut() }

// FailSync makes every fsync of a file fail with errno (0: succeed again).
func (f *FS) FailSync(errno syscall.Errno) {
	f.t.mu.Lock()
	f.t.failSync = errno
	f.t.mu.Unlock()
}

// FailWrites makes every write, size change and fallocate fail with errno
// (0: succeed again).
func (f *FS) FailWrites(errno syscall.Errno) {
	f.t.mu.Lock()
	f.t.failW = errno
	f.t.mu.Unlock()
}

// Heal ends every injected failure.
func (f *FS) Heal() {
	f.FailSync(0)
	f.FailWrites(0)
}

// Stats returns the counters.
func (f *FS) Stats() Stats { return f.t.snapshot() }

// node is a loopback node whose writes, truncates, fallocates and fsyncs go
// through the tracker.
type node struct {
	*fs.LoopbackNode
	fs *FS
}

var (
	_ fs.NodeWrapChilder    = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeWriter         = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeAllocater      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
)

// WrapChild makes every node under the root one of ours.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fs: n.fs}
}

func (n *node) ino() uint64 { return n.StableAttr().Ino }

// Open wraps the loopback file so the kernel never gets the backing
// descriptor for passthrough (which would bypass the tracking).
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return wrap(fh), n.openFlags(fl), 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return in, wrap(fh), n.openFlags(fl), 0
}

func (n *node) openFlags(fl uint32) uint32 {
	if n.fs.opts.directIO {
		fl |= fuse.FOPEN_DIRECT_IO
	}
	return fl
}

func (n *node) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := f.(*handle)
	if !ok {
		return 0, syscall.EBADF
	}
	t := n.fs.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failW != 0 {
		t.stats.FailedWrites++
		return 0, t.failW
	}
	s, err := t.state(n.ino(), h.fd)
	if err != nil {
		return 0, syscall.EIO
	}
	if errno := t.save(s, off, int64(len(data))); errno != 0 {
		return 0, errno
	}
	w, err := unix.Pwrite(h.fd, data, off)
	if err != nil {
		return 0, errnoOf(err)
	}
	t.stats.Writes++
	return uint32(w), 0
}

func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if n.IsDir() {
		return 0 // name-space operations are durable at once
	}
	t := n.fs.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failSync != 0 {
		t.stats.FailedSyncs++
		return t.failSync
	}
	if h, ok := f.(*handle); ok {
		if err := unix.Fdatasync(h.fd); err != nil {
			return errnoOf(err)
		}
	}
	t.synced(n.ino())
	t.stats.Syncs++
	return 0
}

func (n *node) Allocate(ctx context.Context, f fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	h, ok := f.(*handle)
	if !ok {
		return syscall.EBADF
	}
	t := n.fs.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failW != 0 {
		t.stats.FailedWrites++
		return t.failW
	}
	s, err := t.state(n.ino(), h.fd)
	if err != nil {
		return syscall.EIO
	}
	if mode&(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_COLLAPSE_RANGE|unix.FALLOC_FL_INSERT_RANGE) != 0 {
		end := int64(off + size)
		if mode&(unix.FALLOC_FL_COLLAPSE_RANGE|unix.FALLOC_FL_INSERT_RANGE) != 0 {
			end = s.syncedSize // shifts everything after off
		}
		if errno := t.save(s, int64(off), end-int64(off)); errno != 0 {
			return errno
		}
	}
	if err := unix.Fallocate(h.fd, mode, int64(off), int64(size)); err != nil {
		return errnoOf(err)
	}
	return 0
}

// Setattr tracks size changes: growing stays unsynced (a power cut cuts
// the file back), shrinking is durable at once (package caveats).
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	size, ok := in.GetSize()
	if !ok {
		return n.LoopbackNode.Setattr(ctx, f, in, out)
	}
	t := n.fs.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failW != 0 {
		t.stats.FailedWrites++
		return t.failW
	}
	fd, own := -1, false
	if h, ok := f.(*handle); ok {
		fd = h.fd
	} else {
		var err error
		if fd, err = unix.Open(n.fs.Backing+"/"+n.Path(n.Root()), unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
			return errnoOf(err)
		}
		own = true
	}
	s, err := t.state(n.ino(), fd)
	if own {
		_ = unix.Close(fd)
	}
	if err != nil {
		return syscall.EIO
	}
	t.shrunk(s, int64(size))
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}

// CopyFileRange is refused so that the kernel copies through Write.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// handle is an open file: the loopback file for everything but writes,
// without its PassthroughFd.
type handle struct {
	fd    int
	inner fs.FileHandle
}

func wrap(fh fs.FileHandle) *handle {
	fd, _ := fh.(fs.FilePassthroughFder).PassthroughFd()
	return &handle{fd: fd, inner: fh}
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
	_ fs.FileLseeker   = (*handle)(nil)
	_ fs.FileGetlker   = (*handle)(nil)
	_ fs.FileSetlker   = (*handle)(nil)
	_ fs.FileSetlkwer  = (*handle)(nil)
)

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.inner.(fs.FileReader).Read(ctx, dest, off)
}
func (h *handle) Release(ctx context.Context) syscall.Errno {
	return h.inner.(fs.FileReleaser).Release(ctx)
}
func (h *handle) Flush(ctx context.Context) syscall.Errno { return h.inner.(fs.FileFlusher).Flush(ctx) }
func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.inner.(fs.FileGetattrer).Getattr(ctx, out)
}
func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.inner.(fs.FileLseeker).Lseek(ctx, off, whence)
}
func (h *handle) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	return h.inner.(fs.FileGetlker).Getlk(ctx, owner, lk, flags, out)
}
func (h *handle) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.inner.(fs.FileSetlker).Setlk(ctx, owner, lk, flags)
}
func (h *handle) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.inner.(fs.FileSetlkwer).Setlkw(ctx, owner, lk, flags)
}
