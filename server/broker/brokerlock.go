package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fibrilmq/fibril/server/seglog"

	"golang.org/x/sys/unix"
)

// brokerLockName is the data directory's lock file: an Open broker holds
// it (flock, exclusive) for its whole life, so a second broker (or a
// repair) is refused even while the partitions' logs, and with them their
// own LOCK files, are closed by the open-logs cache (idle.go); Verify
// holds it shared.
const brokerLockName = "LOCK"

// lockBrokerDir takes dir's lock, exclusive or shared, without waiting. A
// lock held by another returns seglog.ErrLocked naming the directory.
func lockBrokerDir(dir string, exclusive bool) (*os.File, error) {
	path := filepath.Join(dir, brokerLockName)
	flag := os.O_RDWR | os.O_CREATE
	how := unix.LOCK_EX
	if !exclusive {
		flag, how = os.O_RDONLY, unix.LOCK_SH
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if errors.Is(err, os.ErrNotExist) && !exclusive {
		return nil, nil // no broker ever ran here: nothing to exclude
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (a broker has the data directory open)", seglog.ErrLocked, dir)
		}
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return f, nil
}
