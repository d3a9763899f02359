package faultfs

import (
	"bytes"
	"fmt"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// blockSize is the unit in which old bytes are saved.
const blockSize = 4096

// preimage is a block's bytes as of the last fsync; data nil means n zero
// bytes.
type preimage struct {
	n    int
	data []byte
}

// fileState is what one backing inode has written since its last fsync.
type fileState struct {
	fd         int   // a descriptor of our own on the backing file, to restore it
	syncedSize int64 // size at the last fsync
	saved      map[int64]preimage
}

// tracker holds every file's state. One mutex: writes are serialized, which
// a test file system can afford.
type tracker struct {
	mu       sync.Mutex
	files    map[uint64]*fileState // by backing inode
	held     int64                 // bytes of preimages kept
	max      int64
	failSync syscall.Errno
	failW    syscall.Errno
	stats    Stats
}

// Stats counts what the file system did.
type Stats struct {
	Writes       int64 // write calls passed through
	Syncs        int64 // fsyncs of files passed through
	FailedSyncs  int64 // fsyncs failed on command
	FailedWrites int64 // writes, truncates and fallocates failed on command
	Refused      int64 // writes refused because MaxUnsynced was reached
	PowerCuts    int64
	Restored     int64 // blocks written back by power cuts
	Truncated    int64 // files cut back to their synced size by power cuts
	Tracked      int   // files with unsynced changes now
	Held         int64 // bytes of old blocks held now
}

func newTracker(max int64) *tracker {
	return &tracker{files: map[uint64]*fileState{}, max: max}
}

// state returns ino's state, creating it from fd (dup'ed) with the file's
// current size as its synced size. Caller holds mu.
func (t *tracker) state(ino uint64, fd int) (*fileState, error) {
	if s := t.files[ino]; s != nil {
		return s, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat: %w", err)
	}
	own, err := unix.Dup(fd)
	if err != nil {
		return nil, fmt.Errorf("dup: %w", err)
	}
	unix.CloseOnExec(own)
	s := &fileState{fd: own, syncedSize: st.Size, saved: map[int64]preimage{}}
	t.files[ino] = s
	return s, nil
}

// save keeps the old bytes of every block of [off, off+n) that lies below
// the synced size and was not saved since the last fsync. Caller holds mu.
func (t *tracker) save(s *fileState, off, n int64) syscall.Errno {
	if n <= 0 {
		return 0
	}
	end := min(off+n, s.syncedSize)
	buf := make([]byte, blockSize)
	for b := off / blockSize; b*blockSize < end; b++ {
		if _, ok := s.saved[b]; ok {
			continue
		}
		want := int(min(blockSize, s.syncedSize-b*blockSize))
		got, err := unix.Pread(s.fd, buf[:want], b*blockSize)
		if err != nil {
			return errnoOf(err)
		}
		// Bytes past the current end (after a shrink that we made durable,
		// the file may be shorter) read as zeros.
		clear(buf[got:want])
		if isZero(buf[:want]) {
			s.saved[b] = preimage{n: want}
			continue
		}
		if t.held+int64(want) > t.max {
			t.stats.Refused++
			return syscall.EIO
		}
		t.held += int64(want)
		s.saved[b] = preimage{n: want, data: bytes.Clone(buf[:want])}
	}
	return 0
}

// synced forgets what ino wrote before an fsync that succeeded. Caller
// holds mu.
func (t *tracker) synced(ino uint64) {
	s := t.files[ino]
	if s == nil {
		return
	}
	t.drop(ino, s)
}

func (t *tracker) drop(ino uint64, s *fileState) {
	for _, p := range s.saved {
		t.held -= int64(len(p.data))
	}
	_ = unix.Close(s.fd)
	delete(t.files, ino)
}

// shrunk makes a truncate to size durable at once (see the package
// caveats): blocks past it are forgotten and the synced size lowered.
// Caller holds mu.
func (t *tracker) shrunk(s *fileState, size int64) {
	if size >= s.syncedSize {
		return
	}
	s.syncedSize = size
	for b, p := range s.saved {
		if b*blockSize >= size {
			t.held -= int64(len(p.data))
			delete(s.saved, b)
		}
	}
	// The block holding the new end keeps its preimage, cut to the size.
	if b := size / blockSize; size%blockSize != 0 {
		if p, ok := s.saved[b]; ok && p.n > int(size%blockSize) {
			p.n = int(size % blockSize)
			if p.data != nil {
				t.held -= int64(len(p.data) - p.n)
				p.data = p.data[:p.n:p.n]
			}
			s.saved[b] = p
		}
	}
}

// powerCut restores every tracked file to its synced state and forgets it.
func (t *tracker) powerCut() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var firstErr error
	zeros := make([]byte, blockSize)
	for ino, s := range t.files {
		for b, p := range s.saved {
			data := p.data
			if data == nil {
				data = zeros[:p.n]
			}
			if _, err := unix.Pwrite(s.fd, data, b*blockSize); err != nil && firstErr == nil {
				firstErr = fmt.Errorf("faultfs: restoring inode %d at %d: %w", ino, b*blockSize, err)
			}
			t.stats.Restored++
		}
		var st unix.Stat_t
		if err := unix.Fstat(s.fd, &st); err == nil && st.Size != s.syncedSize {
			t.stats.Truncated++
		}
		if err := unix.Ftruncate(s.fd, s.syncedSize); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("faultfs: truncating inode %d to %d: %w", ino, s.syncedSize, err)
		}
		// The backing file itself is now what a restart should find.
		if err := unix.Fdatasync(s.fd); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("faultfs: syncing inode %d: %w", ino, err)
		}
		t.drop(ino, s)
	}
	t.stats.PowerCuts++
	return firstErr
}

func (t *tracker) snapshot() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stats
	s.Tracked, s.Held = len(t.files), t.held
	return s
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func errnoOf(err error) syscall.Errno {
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}
