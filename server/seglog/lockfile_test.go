package seglog

import (
	"errors"
	"testing"
)

// TestLockFileHints: the hints a writable lock writes are what the next
// open reads; a second writer is refused with ErrLocked; a shared (read-only)
// lock reads them and never writes.
func TestLockFileHints(t *testing.T) {
	dir := t.TempDir()
	var a lockFile
	if d, err := a.open(osFS{}, dir); err != nil || d != 0 {
		t.Fatalf("new LOCK: durable %d, %v; want 0, nil", d, err)
	}
	var b lockFile
	if _, err := b.open(osFS{}, dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("second writer: %v, want ErrLocked", err)
	}
	a.hint.note(41)
	if err := a.writeFront(frontHint{front: 7}, true); err != nil {
		t.Fatal(err)
	}
	a.writeVerified(30)
	a.release()
	a.release() // a second release does nothing

	var r lockFile
	d, found, err := r.openShared(osFS{}, dir)
	if err != nil || !found || d != 41 || r.front.front != 7 {
		t.Fatalf("shared open: durable %d found %v front %d, %v; want 41 true 7", d, found, r.front.front, err)
	}
	if err := r.writeFront(frontHint{front: 99}, true); err != nil {
		t.Fatal(err)
	}
	r.writeVerified(99)
	r.release()

	var c lockFile
	if d, err := c.open(osFS{}, dir); err != nil || d != 41 || c.front.front != 7 || c.verified != 30 {
		t.Fatalf("reopen: durable %d front %d verified %d, %v; want 41, 7, 30 (the shared lock wrote nothing)", d, c.front.front, c.verified, err)
	}
	c.release()

	var none lockFile
	if _, found, err := none.openShared(osFS{}, t.TempDir()); err != nil || found {
		t.Fatalf("no LOCK file: found %v, %v; want false, nil", found, err)
	}
}
