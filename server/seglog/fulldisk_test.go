package seglog

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory for the
// test, or skips with the reason when it cannot (not root, no mount).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// TestFullDiskResumesWithAnyRoom: on a full disk the active segment asked
// for its doubled size and nothing less, so a log stayed refused with 5 MB
// free waiting for 16 MiB. It now takes what the append needs: writing
// resumes as soon as that much is free, and a full disk is ENOSPC.
func TestFullDiskResumesWithAnyRoom(t *testing.T) {
	mnt := mountTmpfs(t, "6m")
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Open(filepath.Join(mnt, "log"), Options{SegmentSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	data := bytes.Repeat([]byte{0x5a}, 60<<10)
	appended := 0
	for ; appended < 200; appended++ {
		if _, err = l.Append([]Entry{{Data: data}}); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("after %d appends: %v, want ENOSPC", appended, err)
	}
	// 4 MiB would have been the last doubled size; the disk holds more.
	if appended*len(data) < 4<<20+512<<10 {
		t.Fatalf("only %d bytes appended on a 6 MiB disk with 1 MiB used", appended*len(data))
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if _, err := l.Append([]Entry{{Data: data}}); err != nil {
			t.Fatalf("append %d with 1 MiB free again: %v", i, err)
		}
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
}
