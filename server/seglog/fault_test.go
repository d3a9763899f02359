package seglog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/fibrilmq/fibril/internal/crashfs"
)

func TestFullDiskThenRecovers(t *testing.T) {
	fs := newCrashFS()
	opts := Options{SegmentSize: 4 << 10, FS: fs}
	l, dir := openTest(t, opts)
	fill(t, l, 1, 20, 4)
	fs.FailAllocate(syscall.ENOSPC)
	var err error
	n := 21
	for ; n < 1000 && err == nil; n++ {
		_, err = l.Append([]Entry{entry(n)})
	}
	if !errors.Is(err, ErrWriteFailed) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ErrWriteFailed wrapping ENOSPC", err)
	}
	failedAt := n - 1
	if _, last := l.Bounds(); last != Seq(failedAt-1) {
		t.Fatalf("last %d after failed append of %d", last, failedAt)
	}
	verifyAll(t, l, 1, failedAt-1)
	if _, err := l.Append([]Entry{entry(failedAt)}); !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("append while still full: %v", err)
	}
	fs.FailAllocate(nil) // space returns
	fill(t, l, failedAt, failedAt+50, 5)
	verifyAll(t, l, 1, failedAt+50)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	verifyAll(t, l2, 1, failedAt+50)
}

func TestFailedWriteLeavesNoTrace(t *testing.T) {
	fs := newCrashFS()
	opts := Options{SegmentSize: 64 << 10, Policy: PolicySync, FS: fs}
	l, dir := openTest(t, opts)
	fill(t, l, 1, 10, 2)
	// The next batch is written only in part: its first two records whole.
	// The first has the size of entry(11), so without the cleanup the
	// second would sit exactly where seq 12 belongs after the retry.
	bad := []Entry{
		{Meta: []byte("bad"), Data: make([]byte, len(entry(11).Data))},
		{Meta: []byte("b2"), Data: []byte("y")},
		{Meta: []byte("b3"), Data: make([]byte, 200)},
	}
	if recordSize(3, len(bad[0].Data)) != recordSize(len(entry(11).Meta), len(entry(11).Data)) {
		t.Fatal("test setup: sizes differ")
	}
	fs.FailWrites(syscall.EIO, recordSize(3, len(bad[0].Data))+recordSize(2, 1)+50)
	if _, err := l.Append(bad); !errors.Is(err, ErrWriteFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("append with failing write: %v", err)
	}
	if d := l.Durable(); d != 10 {
		t.Fatalf("durable %d after failed write, want 10", d)
	}
	fs.FailWrites(nil, 0)
	fill(t, l, 11, 11, 1) // a shorter record over the failed batch's bytes
	l.Abandon()
	l2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	verifyAll(t, l2, 1, 11)
}

func TestFailedSyncIsSticky(t *testing.T) {
	for _, p := range []Policy{PolicySync, PolicyCaller, PolicyNone} {
		t.Run(p.String(), func(t *testing.T) {
			fs := newCrashFS()
			opts := Options{SegmentSize: 8 << 10, Policy: p, FS: fs}
			l, dir := openTest(t, opts)
			fill(t, l, 1, 10, 3)
			if _, err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			fs.FailSyncs(syscall.EIO)
			_, err := l.Append([]Entry{entry(11)})
			if p != PolicySync {
				if err != nil {
					t.Fatalf("append without sync: %v", err)
				}
				_, err = l.Sync()
			}
			if !errors.Is(err, ErrSyncFailed) {
				t.Fatalf("after a failed fsync: %v, want ErrSyncFailed", err)
			}
			fs.FailSyncs(nil) // the disk looks fine again, but the pages are gone
			if _, err := l.Append([]Entry{entry(12)}); !errors.Is(err, ErrSyncFailed) {
				t.Fatalf("append after a failed fsync: %v, want ErrSyncFailed", err)
			}
			if d, err := l.Sync(); !errors.Is(err, ErrSyncFailed) || d != 10 {
				t.Fatalf("Sync after a failed fsync: %d, %v; want 10, ErrSyncFailed", d, err)
			}
			if err := l.Close(); !errors.Is(err, ErrSyncFailed) {
				t.Fatalf("Close after a failed fsync: %v", err)
			}
			if _, err := fs.Crash(rand.New(rand.NewPCG(1, 2)), crashfs.CrashCut); err != nil {
				t.Fatal(err)
			}
			l2, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Close()
			verifyAll(t, l2, 1, 10)
		})
	}
}

// TestConcurrentAppendersDurableWhenTold: writers append at once; under
// PolicySync each Append returns durable, under PolicyCaller each writer's
// Sync (running beside the others' Appends) covers its record.
func TestConcurrentAppendersDurableWhenTold(t *testing.T) {
	for _, p := range []Policy{PolicySync, PolicyCaller} {
		t.Run(p.String(), func(t *testing.T) {
			l, _ := openTest(t, Options{Policy: p})
			const writers, per = 8, 40
			errs := make(chan error, writers)
			for w := 0; w < writers; w++ {
				go func() {
					for i := 0; i < per; i++ {
						first, err := l.Append([]Entry{{Data: []byte("x")}})
						if err == nil && p == PolicyCaller {
							var d Seq
							if d, err = l.Sync(); err == nil && d < first {
								err = fmt.Errorf("Sync returned %d, below the record %d appended before it", d, first)
							}
						}
						if err == nil && l.Durable() < first {
							err = fmt.Errorf("record %d not durable (durable %d)", first, l.Durable())
						}
						if err != nil {
							errs <- err
							return
						}
					}
					errs <- nil
				}()
			}
			for w := 0; w < writers; w++ {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if d := l.Durable(); d != writers*per {
				t.Fatalf("durable %d, want %d", d, writers*per)
			}
		})
	}
}
