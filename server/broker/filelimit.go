package broker

// The open-files limit. Each partition holds four descriptors while its
// logs are open (their LOCK files and active segments); the open-logs
// cache (idle.go) bounds how many are, but a server with many busy topics
// can still reach the process's RLIMIT_NOFILE. Opening a topic or a new segment then
// fails with EMFILE (or ENFILE, the system's limit): the engine answers
// ErrTooManyFiles, having created and stored nothing, counts it
// (FileLimitErrors, for /metrics) and reports it through Options.Logf,
// marked ERROR, at most once a minute, so a publisher or an operator sees
// the limit rather than an internal error.

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"
)

// fileLimitReportEvery is the least time between two ERROR reports.
const fileLimitReportEvery = time.Minute

type fileLimit struct {
	count    atomic.Uint64
	reported atomic.Int64 // unix nanoseconds of the last report
}

// isFileLimit reports whether err comes from an open-files limit.
func isFileLimit(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// FileLimitErrors returns how many opens failed on the open-files limit
// since the engine opened.
func (b *Broker) FileLimitErrors() uint64 { return b.fileLimit.count.Load() }

// noteFileErr counts an open-files limit error and returns err wrapped with
// ErrTooManyFiles; any other error is returned as it is.
func (b *Broker) noteFileErr(err error) error {
	if err == nil || !isFileLimit(err) || errors.Is(err, ErrTooManyFiles) {
		return err
	}
	b.fileLimit.count.Add(1)
	now := time.Now().UnixNano()
	last := b.fileLimit.reported.Load()
	if now-last >= int64(fileLimitReportEvery) && b.fileLimit.reported.CompareAndSwap(last, now) {
		b.alertf("open-files limit reached (%d so far): topics cannot be created nor logs grow until descriptors are freed or the limit (ulimit -n) is raised: %v", b.fileLimit.count.Load(), err)
	}
	return fmt.Errorf("%w: %w", ErrTooManyFiles, err)
}
