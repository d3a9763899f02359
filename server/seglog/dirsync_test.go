package seglog

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/crashfs"
)

// gatedFS is a crashfs.FS whose directory syncs, once armed, wait until the
// gate opens (a file system whose journal commit stalls) or fail.
type gatedFS struct {
	*crashfs.FS
	mu      sync.Mutex
	gate    chan struct{} // non-nil: SyncDir waits for it to close
	fail    error         // non-nil: SyncDir fails with it
	entered chan struct{} // gets a token each time SyncDir starts waiting
}

func (g *gatedFS) SyncDir(dir string) error {
	g.mu.Lock()
	gate, fail := g.gate, g.fail
	g.mu.Unlock()
	if fail != nil {
		return fail
	}
	if gate != nil {
		select {
		case g.entered <- struct{}{}:
		default:
		}
		<-gate
	}
	return g.FS.SyncDir(dir)
}

// TestTruncateFrontDoesNotWaitForDirectorySync (the bug: TruncateFront
// fsynced the log's directory inline, under the log's lock; on a busy VM
// one such fsync took 1.4 s, stalling the partition actor that called it
// and, behind the lock, every Read and Append): the truncation returns and
// the log stays usable while the directory sync is stuck, the sync still
// happens, and Close waits for it.
func TestTruncateFrontDoesNotWaitForDirectorySync(t *testing.T) {
	fs := &gatedFS{FS: newCrashFS(), entered: make(chan struct{}, 1)}
	l, _ := openTest(t, Options{SegmentSize: 4 << 10, FS: fs})
	fill(t, l, 1, 400, 4)
	_, dirsBefore := fs.SyncCounts()
	gate := make(chan struct{})
	fs.mu.Lock()
	fs.gate = gate
	fs.mu.Unlock()

	done := make(chan error, 1)
	go func() { done <- l.TruncateFront(250) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("TruncateFront: %v", err)
		}
	case <-time.After(10 * time.Second):
		close(gate)
		t.Fatal("TruncateFront waited for the stuck directory sync")
	}
	select {
	case <-fs.entered:
	case <-time.After(10 * time.Second):
		close(gate)
		t.Fatal("no directory sync was started for the truncation")
	}
	verifyAll(t, l, 250, 400) // reads go on meanwhile (an append could roll, and a roll's own directory sync waits)
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before the directory sync ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, dirs := fs.SyncCounts(); dirs <= dirsBefore {
		t.Fatalf("directory syncs %d, want more than the %d before the truncation", dirs, dirsBefore)
	}
}

// TestTruncateFrontReportsFailedDirectorySync: a directory sync that fails
// in the background is returned by a TruncateFront, once.
func TestTruncateFrontReportsFailedDirectorySync(t *testing.T) {
	fs := &gatedFS{FS: newCrashFS()}
	l, _ := openTest(t, Options{SegmentSize: 4 << 10, FS: fs})
	fill(t, l, 1, 400, 4)
	boom := errors.New("journal aborted")
	fs.mu.Lock()
	fs.fail = boom
	fs.mu.Unlock()
	// The truncation itself succeeds; its directory sync fails in the
	// background, and a TruncateFront returns that failure once it is known
	// (this one, if the sync failed before it returned, or a later one).
	err := l.TruncateFront(200)
	for i := 0; i < 1000 && err == nil; i++ {
		time.Sleep(time.Millisecond)
		err = l.TruncateFront(200)
	}
	if !errors.Is(err, boom) {
		t.Fatalf("TruncateFront after a failed directory sync: %v, want %v", err, boom)
	}
	if first, _ := l.Bounds(); first <= 1 || first > 200 {
		t.Fatalf("first %d after TruncateFront(200): the truncation itself should have happened", first)
	}
	if err := l.TruncateFront(200); err != nil {
		t.Fatalf("the failure is reported once; then: %v", err)
	}
}
