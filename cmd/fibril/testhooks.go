package main

// Test-only hooks of `fibril serve` for fault runs (internal/faultrun,
// FAULTS.md). They are not in `fibril serve -h` and change nothing unless
// set.
//
//   - FIBRIL_TEST_CLOCK_OFFSET_FILE=path: the broker's clock is the system
//     clock plus the offset in milliseconds written in path, re-read every
//     20 ms (internal/offsetclock), so a harness can step it.
//   - FIBRIL_TEST_CPUPROFILE=path: a CPU profile of the whole run is
//     written to path (go tool pprof) when serve returns, for finding
//     per-message costs under a stock client (bench/natsbench.sh
//     --profile).
//   - Built with -tags fibril_broken_nosync: every log reports appends as
//     durable without an fsync, so confirms and acks are answered before
//     they are on disk. A deliberately broken build that the fault checker
//     must catch (TestBrokenBuildFailsTheChecker); never ship it.
//   - Built with -tags fibril_broken_quorum (server/replog): a replicated
//     log's leader answers Sync at once, so confirms and settles are
//     answered before the quorum commit
//     (TestClusterBrokenBuildFailsTheChecker); never ship it.

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/fibrilmq/fibril/internal/offsetclock"
	"github.com/fibrilmq/fibril/server"
	"github.com/fibrilmq/fibril/server/seglog"
)

// testHooks applies the hooks to opts and returns what undoes them.
func testHooks(opts *server.Options, lookup func(string) (string, bool)) (stop func(), err error) {
	stop = func() {}
	if path, ok := lookup("FIBRIL_TEST_CLOCK_OFFSET_FILE"); ok && path != "" {
		c, err := offsetclock.Open(path, 20*time.Millisecond)
		if err != nil {
			return stop, fmt.Errorf("FIBRIL_TEST_CLOCK_OFFSET_FILE: %w", err)
		}
		opts.Engine.Clock = c
		stop = c.Close
	}
	if path, ok := lookup("FIBRIL_TEST_CPUPROFILE"); ok && path != "" {
		f, err := os.Create(path)
		if err != nil {
			return stop, fmt.Errorf("FIBRIL_TEST_CPUPROFILE: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return stop, fmt.Errorf("FIBRIL_TEST_CPUPROFILE: %w", err)
		}
		prev := stop
		stop = func() {
			pprof.StopCPUProfile()
			_ = f.Close()
			prev()
		}
	}
	if brokenNoSync {
		seg := opts.Engine.SegmentSize
		opts.Engine.OpenStore = func(dir string, _ seglog.Policy) (seglog.Store, error) {
			so := seglog.Options{Policy: seglog.PolicyNone, SegmentSize: seg}
			if filepath.Base(dir) == "events" {
				so.SegmentSize = 4 << 20
			}
			l, err := seglog.Open(dir, so)
			if err != nil {
				return nil, err
			}
			return noSyncStore{l}, nil
		}
	}
	return stop, nil
}

// noSyncStore claims every appended record durable without an fsync.
type noSyncStore struct{ seglog.Store }

func (s noSyncStore) Sync() (seglog.Seq, error) { _, last := s.Bounds(); return last, nil }
func (s noSyncStore) Durable() seglog.Seq       { _, last := s.Bounds(); return last }

// SideRecords is false: the log's side records become durable only with a
// real fsync, which this store never claims, so side copies stay off.
func (s noSyncStore) SideRecords() bool { return false }
