package seglog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockFile is the log's LOCK file: the flock that keeps a second Log out
// of the directory while this one is open (exclusive; shared for a
// read-only open), and the three hints kept in it (durablehint.go): the
// durable point, the front of the log, the verified mark. It is opened
// first and released last; nothing else touches the file.
type lockFile struct {
	f        File        // nil: released, or a read-only open found none
	ro       bool        // a read-only open: hints are read, never written
	hint     durableHint // the durable point's writer (a read-only open leaves it off)
	front    frontHint   // the front as last read or written
	verified Seq         // segments below it were checked by an earlier Open (QuickVerify)
}

// open creates (if needed) and locks dir's LOCK file for a writable log,
// reads its hints and returns the durable point it names (0: none). It
// fails with ErrLocked when another Log holds the directory.
func (k *lockFile) open(fsys FS, dir string) (Seq, error) {
	f, err := fsys.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, fmt.Errorf("seglog: open lock file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			err = lockedError(dir, f)
		} else {
			err = fmt.Errorf("seglog: flock %s: %w", dir, err)
		}
		f.Close()
		return 0, err
	}
	durable := readHint(f)
	k.f = f
	k.front = readFrontHint(f)
	k.verified = readVerifiedMark(f)
	k.hint.f, k.hint.last = f, durable
	return durable, nil
}

// openShared takes dir's LOCK file shared, for a read-only log, and
// returns the durable point it names. found == false: there is no LOCK
// file (never opened for writing, or lost). A writer elsewhere makes it
// fail with ErrLocked.
func (k *lockFile) openShared(fsys FS, dir string) (durable Seq, found bool, err error) {
	k.ro = true
	f, err := fsys.OpenFile(filepath.Join(dir, lockName), os.O_RDONLY, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("seglog: open lock file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return 0, false, fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		return 0, false, fmt.Errorf("seglog: flock %s: %w", dir, err)
	}
	k.f = f
	k.front = readFrontHint(f)
	return readHint(f), true, nil
}

// writeFront writes h as the front hint, fsyncing the file with sync.
func (k *lockFile) writeFront(h frontHint, sync bool) error {
	if k.f == nil || k.ro {
		return nil
	}
	if _, err := k.f.WriteAt(encodeFrontHint(h), frontOff); err != nil {
		return err
	}
	k.front = h
	if sync {
		return k.f.Sync()
	}
	return nil
}

// writeVerified records that every segment below first was checked.
func (k *lockFile) writeVerified(first Seq) {
	if k.f == nil || k.ro {
		return
	}
	_, _ = k.f.WriteAt(encodeVerifiedMark(first), verifiedOff) // a hint: lost, everything is checked again
}

// release stops the hint's writes and closes the file, which drops the
// flock. A second release does nothing.
func (k *lockFile) release() {
	if k.f == nil {
		return
	}
	k.hint.release()
	k.f.Close()
	k.f = nil
}
