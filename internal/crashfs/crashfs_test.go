package crashfs_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/fibrilmq/fibril/internal/crashfs"
	"github.com/fibrilmq/fibril/server/seglog"
)

func TestCrashDropsOnlyUnsyncedWrites(t *testing.T) {
	fs := crashfs.New(seglog.OSFS())
	path := filepath.Join(t.TempDir(), "f")
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mustWrite := func(p string, off int64) {
		t.Helper()
		if _, err := f.WriteAt([]byte(p), off); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite("synced", 0)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	mustWrite("LOST", 2)
	mustWrite("tail", 6)
	if n := fs.Unsynced("LOCK"); n != 8 {
		t.Fatalf("Unsynced = %d, want 8", n)
	}
	lost, err := fs.Crash(nil, crashfs.CrashDropAll)
	if err != nil || lost != 8 {
		t.Fatalf("Crash = %d, %v; want 8 bytes lost", lost, err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The tail past the synced end comes back as zeros (the size stays).
	if want := []byte("synced\x00\x00\x00\x00"); !bytes.Equal(got, want) {
		t.Fatalf("after crash %q, want %q", got, want)
	}
	if files, _ := fs.SyncCounts(); files != 1 {
		t.Fatalf("file syncs %d, want 1", files)
	}
}

func TestInjectedFaults(t *testing.T) {
	fs := crashfs.New(seglog.OSFS())
	path := filepath.Join(t.TempDir(), "f")
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fs.FailWrites(syscall.EIO, 3)
	if n, err := f.WriteAt([]byte("abcdef"), 0); n != 3 || !errors.Is(err, syscall.EIO) {
		t.Fatalf("write over budget = %d, %v; want a short write of 3 and EIO", n, err)
	}
	fs.FailWrites(nil, 0)
	fs.FailSyncs(syscall.EIO)
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync = %v, want EIO", err)
	}
	fs.FailSyncs(nil)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	// The write whose sync failed stays lost, as on Linux.
	if lost, err := fs.Crash(nil, crashfs.CrashDropAll); err != nil || lost != 3 {
		t.Fatalf("Crash = %d, %v; want the 3 bytes of the failed sync lost", lost, err)
	}
	fs.FailAllocate(syscall.ENOSPC)
	if err := f.Allocate(0, 4096); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Allocate = %v, want ENOSPC", err)
	}
}
