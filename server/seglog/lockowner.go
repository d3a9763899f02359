package seglog

import (
	"fmt"
	"os"
)

// lockedError is ErrLocked naming the directory and, when /proc/locks
// tells, the process that holds the lock.
func lockedError(dir string, f File) error {
	pid := lockHolder(f)
	switch {
	case pid == 0:
		return fmt.Errorf("%w: %s", ErrLocked, dir)
	case pid == os.Getpid():
		return fmt.Errorf("%w: %s (this process, pid %d, has it open already)", ErrLocked, dir, pid)
	}
	return fmt.Errorf("%w: %s (pid %d holds it)", ErrLocked, dir, pid)
}
