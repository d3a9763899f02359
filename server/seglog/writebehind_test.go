package seglog

import (
	"bytes"
	"testing"

	"github.com/fibrilmq/fibril/internal/crashfs"
)

// noneLog opens a PolicyNone log on a crashfs.FS (closed at cleanup) and
// returns a 64 KiB record to append.
func noneLog(t *testing.T) (*Log, *crashfs.FS, []byte) {
	t.Helper()
	fs := newCrashFS()
	l, err := Open(t.TempDir(), Options{FS: fs, Policy: PolicyNone})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, fs, bytes.Repeat([]byte{7}, 64<<10)
}

// TestWriteBehindBoundsUnsyncedBytes: a PolicyNone log fsyncs in the
// background once 8 MiB were appended since the last such fsync, so dirty
// data never piles up to a whole segment (a roll used to flush 64 MiB on
// the writer's path: p99 214-241 ms at 14.5k msgs/s with durability none).
func TestWriteBehindBoundsUnsyncedBytes(t *testing.T) {
	l, fs, rec := noneLog(t)
	for range 320 { // 20 MiB, one segment
		if _, err := l.Append([]Entry{{Data: rec}}); err != nil {
			t.Fatal(err)
		}
	}
	l.wb.wait()
	if got := fs.Unsynced(lockName); got > writeBehindBytes+64<<10 {
		t.Fatalf("%d bytes unsynced after 20 MiB, want at most about %d", got, writeBehindBytes)
	}
	if d := l.Durable(); d < 100 {
		t.Fatalf("durable point %d: no background fsync happened", d)
	}
	files, _ := fs.SyncCounts()
	if files < 2 || files > 3 {
		t.Fatalf("%d file syncs for 20 MiB, want 2 (one per 8 MiB)", files)
	}
}

// TestWriteBehindQuietWhenSynced: a PolicyNone log its owner syncs often
// enough gets no extra background fsync.
func TestWriteBehindQuietWhenSynced(t *testing.T) {
	l, fs, rec := noneLog(t)
	syncs := 0
	for i := range 320 {
		if _, err := l.Append([]Entry{{Data: rec}}); err != nil {
			t.Fatal(err)
		}
		if i%16 == 15 { // every 1 MiB
			if _, err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			syncs++
		}
	}
	l.wb.wait()
	if files, _ := fs.SyncCounts(); files != syncs {
		t.Fatalf("%d file syncs, want only the owner's %d", files, syncs)
	}
}

// TestNoWriteBehindUnderPolicyCaller: a PolicyCaller log (its owner
// fsyncs: the broker's commit) starts no background fsync, however much is
// appended.
func TestNoWriteBehindUnderPolicyCaller(t *testing.T) {
	fs := newCrashFS()
	l, err := Open(t.TempDir(), Options{FS: fs, Policy: PolicyCaller})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	rec := bytes.Repeat([]byte{7}, 64<<10)
	for range 200 { // 12.5 MiB, past writeBehindBytes
		if _, err := l.Append([]Entry{{Data: rec}}); err != nil {
			t.Fatal(err)
		}
	}
	l.wb.wait()
	if files, _ := fs.SyncCounts(); files != 0 || l.Durable() != 0 {
		t.Fatalf("PolicyCaller: %d syncs, durable %d; want none", files, l.Durable())
	}
}

// TestWriteBehindNotSkippedWhileItsFsyncRuns: while the background fsync
// runs, the durable point it sets (before it records it as its own) must
// not pass for an fsync by someone else, which reset the byte count and
// skipped the next background fsync (TestWriteBehindBoundsUnsyncedBytes
// saw one fsync for 20 MiB now and then).
func TestWriteBehindNotSkippedWhileItsFsyncRuns(t *testing.T) {
	l, fs, rec := noneLog(t)
	if _, err := l.Append([]Entry{{Data: rec}}); err != nil {
		t.Fatal(err)
	}
	// As if the background fsync were running and had just raised the
	// durable point, not yet noted in wb.durable.
	l.wb.running.Store(true)
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	for range writeBehindBytes / len(rec) {
		if _, err := l.Append([]Entry{{Data: rec}}); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := fs.SyncCounts()
	l.wb.durable.Store(uint64(l.Durable()))
	l.wb.running.Store(false) // it ends
	if _, err := l.Append([]Entry{{Data: rec}}); err != nil {
		t.Fatal(err)
	}
	l.wb.wait()
	if after, _ := fs.SyncCounts(); after == before {
		t.Fatalf("no background fsync after %d unsynced bytes", fs.Unsynced(lockName))
	}
}

// TestWriteBehindPacing: add and due start the background fsync once
// writeBehindBytes piled up, never while one runs, and not when someone
// else's fsync moved the durable point meanwhile.
func TestWriteBehindPacing(t *testing.T) {
	var w writeBehind
	syncs := 0
	at := Seq(0) // the durable point the fake fsync leaves
	sync := func() Seq { syncs++; return at }
	wrote := func(n int64, durable Seq) {
		if w.add(n) && w.due(durable) {
			if !w.running.Load() {
				t.Fatal("a started fsync does not count as running")
			}
			w.run(sync)
		}
	}
	half := int64(writeBehindBytes / 2)
	wrote(half, 0)
	if syncs != 0 {
		t.Fatalf("%d fsyncs after %d bytes, want none", syncs, half)
	}
	at = 7
	wrote(half, 0)
	if w.wait(); syncs != 1 || w.durable.Load() != 7 || w.unsynced != 0 || w.running.Load() {
		t.Fatalf("after %d bytes: %d fsyncs, durable %d, unsynced %d, running %v; want 1, 7, 0, false", writeBehindBytes, syncs, w.durable.Load(), w.unsynced, w.running.Load())
	}
	// Someone else fsynced up to 9: the count starts again, no fsync.
	wrote(writeBehindBytes, 9)
	if syncs != 1 || w.durable.Load() != 9 || w.unsynced != 0 {
		t.Fatalf("after another's fsync: %d fsyncs, durable %d, unsynced %d; want 1, 9, 0", syncs, w.durable.Load(), w.unsynced)
	}
	// One runs: nothing starts, the bytes stay counted.
	w.running.Store(true)
	wrote(writeBehindBytes, 9)
	if syncs != 1 || w.unsynced != writeBehindBytes {
		t.Fatalf("while one runs: %d fsyncs, unsynced %d; want 1, %d", syncs, w.unsynced, writeBehindBytes)
	}
	w.running.Store(false)
	w.add(0)
	wrote(0, 9)
	if w.wait(); syncs != 2 {
		t.Fatalf("once it ended: %d fsyncs, want 2", syncs)
	}
}

// TestPolicyNoneAppendAllocsLikeCaller: pacing the background fsync costs
// an Append no allocation (a closure made per Append for it cost one, seen
// in BenchmarkAppend -benchmem while Log was split into parts); below
// writeBehindBytes nothing starts, so both policies allocate alike.
func TestPolicyNoneAppendAllocsLikeCaller(t *testing.T) {
	allocs := map[Policy]float64{}
	for _, p := range []Policy{PolicyCaller, PolicyNone} {
		l, err := Open(t.TempDir(), Options{Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		es := []Entry{{Data: bytes.Repeat([]byte{1}, 1<<10)}}
		for range 100 { // past the first allocations of buffer, index and segment
			if _, err := l.Append(es); err != nil {
				t.Fatal(err)
			}
		}
		allocs[p] = testing.AllocsPerRun(1000, func() {
			if _, err := l.Append(es); err != nil {
				t.Fatal(err)
			}
		})
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if allocs[PolicyNone] > allocs[PolicyCaller]+0.1 {
		t.Fatalf("PolicyNone Append: %.2f allocations, PolicyCaller %.2f", allocs[PolicyNone], allocs[PolicyCaller])
	}
}
