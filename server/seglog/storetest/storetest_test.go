package storetest_test

import (
	"testing"

	"github.com/fibrilmq/fibril/server/seglog"
	"github.com/fibrilmq/fibril/server/seglog/storetest"
)

// TestSegmentLog runs the suite against the file-backed segment log under
// each policy, with segments small enough (but above the largest record) that
// truncation drops whole files.
func TestSegmentLog(t *testing.T) {
	for _, p := range []seglog.Policy{seglog.PolicySync, seglog.PolicyCaller, seglog.PolicyNone} {
		t.Run(p.String(), func(t *testing.T) {
			storetest.Run(t, func(t *testing.T, dir string) seglog.Store {
				l, err := seglog.Open(dir, seglog.Options{Policy: p, SegmentSize: 128 << 10})
				if err != nil {
					t.Fatal(err)
				}
				return l
			}, storetest.Options{Persistent: true, DurableOnAppend: p == seglog.PolicySync})
		})
	}
}

// TestMemStore runs the suite against the in-memory store (what
// queue.Memory hands out).
func TestMemStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dir string) seglog.Store { return seglog.NewMemStore() },
		storetest.Options{DurableOnAppend: true, UnverifiedCRC: true})
}
