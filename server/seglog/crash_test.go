package seglog

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/crashfs"
)

// model remembers what was appended: for each sequence number the content
// that a successful Append gave it, plus what failed Appends tried to write
// there (such bytes may survive a crash; they were never reported durable).
type model struct {
	mu    sync.Mutex
	ok    map[Seq]Entry
	tried map[string]Entry // by Meta, which is unique per entry
}

func newModel() *model { return &model{ok: map[Seq]Entry{}, tried: map[string]Entry{}} }

func (m *model) appended(first Seq, batch []Entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, e := range batch {
		m.ok[first+Seq(i)] = e
	}
}

func (m *model) failed(batch []Entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range batch {
		m.tried[string(e.Meta)] = e
	}
}

func sameEntry(r Record, e Entry) bool {
	return bytes.Equal(r.Meta, e.Meta) && bytes.Equal(r.Data, e.Data) && r.Time == e.Time && r.CRC == crc32.ChecksumIEEE(e.Data)
}

// check verifies a reopened store: every sequence number up to durable is
// there with the content its successful Append gave it, everything present
// is contiguous and is something that was appended (nothing invented).
// Records past durable that a failed or lost write left are forgotten from
// the model when they did not survive.
func (m *model) check(t *testing.T, s Store, durable Seq) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	first, last := s.Bounds()
	if last < durable {
		t.Fatalf("last %d after recovery, but %d was reported durable", last, durable)
	}
	next := first
	err := s.Scan(first, 0, func(r Record) bool {
		if r.Seq != next {
			t.Fatalf("scan gave seq %d, want %d", r.Seq, next)
		}
		next++
		if e, ok := m.ok[r.Seq]; ok && sameEntry(r, e) {
			return true
		}
		if r.Seq <= durable {
			t.Fatalf("durable record %d has the wrong content (meta %q)", r.Seq, r.Meta)
		}
		if e, ok := m.tried[string(r.Meta)]; ok && sameEntry(r, e) {
			m.ok[r.Seq] = e // it survived: it is now what the log holds
			return true
		}
		t.Fatalf("record %d (meta %q) was never appended", r.Seq, r.Meta)
		return false
	})
	if err != nil {
		t.Fatalf("scan after recovery: %v", err)
	}
	if next != last+1 {
		t.Fatalf("scan stopped at %d, last is %d", next, last)
	}
	for seq := range m.ok {
		if seq > last {
			delete(m.ok, seq)
		}
	}
	clear(m.tried)
}

// randomBatch returns 1..max entries with random content tagged by tag.
func randomBatch(rng *rand.Rand, tag string, max int) []Entry {
	b := make([]Entry, 1+rng.IntN(max))
	for i := range b {
		data := make([]byte, rng.IntN(300))
		for j := range data {
			data[j] = byte(rng.UintN(255) + 1) // no zero runs, see Caveats
		}
		b[i] = Entry{Meta: fmt.Appendf(nil, "%s-%d", tag, i), Data: data, Time: rng.Int64N(1<<40) + 1}
	}
	return b
}

// crashRound appends with several writers, maybe with injected faults, then
// crashes the log and returns the highest sequence number reported durable.
// With truncate, a goroutine also drops the front of the log
// (TruncateFront at random points, so dropped segments become spares,
// get zeroed and are reused by the writers' rolls) while they write.
func crashRound(t *testing.T, rng *rand.Rand, l *Log, fs *crashfs.FS, m *model, round int, truncate bool, side *sideModel) Seq {
	writers := 1 + rng.IntN(3)
	ops := 1 + rng.IntN(25)
	fault := rng.IntN(6) // 0: failing writes, 1: failing syncs, 2: full disk, else none
	switch fault {
	case 0:
		fs.FailWrites(syscall.EIO, rng.Int64N(20000))
	case 1:
		if rng.IntN(2) == 0 {
			fs.FailSyncs(syscall.EIO)
		}
	case 2:
		fs.FailAllocate(syscall.ENOSPC)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var reported Seq
	stopTrunc := make(chan struct{})
	var truncWG sync.WaitGroup
	if truncate {
		trng := rand.New(rand.NewPCG(rng.Uint64(), 77))
		truncWG.Add(1)
		go func() {
			defer truncWG.Done()
			for {
				select {
				case <-stopTrunc:
					return
				case <-time.After(time.Duration(trng.IntN(500)) * time.Microsecond):
				}
				first, last := l.Bounds()
				if last < first {
					continue
				}
				// With a fault armed, a failed directory sync or removal is expected.
				if err := l.TruncateFront(first + Seq(trng.Int64N(int64(last-first)+1))); err != nil && fault > 2 {
					t.Errorf("truncate front: %v", err)
				}
			}
		}()
	}
	for w := 0; w < writers; w++ {
		wrng := rand.New(rand.NewPCG(rng.Uint64(), uint64(w)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < ops; i++ {
				batch := randomBatch(wrng, fmt.Sprintf("r%dw%di%d", round, w, i), 12)
				if l.opts.Compression != CompressionNone {
					for _, e := range batch { // compressible, so segments get compressed
						for j := range e.Data {
							e.Data[j] = 'a' + e.Data[j]%4
						}
					}
				}
				first, err := l.Append(batch)
				if err != nil {
					if !errors.Is(err, ErrWriteFailed) && !errors.Is(err, ErrSyncFailed) {
						t.Errorf("append: unexpected error %v", err)
					}
					m.failed(batch)
					continue
				}
				m.appended(first, batch)
				if side != nil && wrng.IntN(2) == 0 {
					side.append(t, wrng, l, round)
				}
				end := first + Seq(len(batch)) - 1
				if l.opts.Policy != PolicySync && wrng.IntN(4) == 0 {
					d, err := l.Sync()
					if err != nil {
						continue
					}
					end = d
				} else if l.opts.Policy != PolicySync {
					continue
				}
				mu.Lock()
				reported = max(reported, end)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stopTrunc)
	truncWG.Wait()
	if d := l.Durable(); d < reported {
		t.Fatalf("Durable %d below a reported durable point %d", d, reported)
	} else {
		reported = d
	}
	fs.FailWrites(nil, 0)
	fs.FailSyncs(nil)
	fs.FailAllocate(nil)
	if side != nil {
		side.crashed(round, l.DurableSide())
	}
	l.Abandon()
	mode := crashfs.CrashMode(rng.IntN(3))
	t.Logf("round %d: %d writers x %d ops, fault %d, crash mode %d, durable %d", round, writers, ops, fault, mode, reported)
	if _, err := fs.Crash(rng, mode); err != nil {
		t.Fatal(err)
	}
	return reported
}

func TestCrashRecovery(t *testing.T) { testCrashRecovery(t, false, false) }

// TestCrashRecoveryWithTruncation: the same with the front of the log
// dropped while the writers write, so recycled segment files (spares)
// take part in every crash.
func TestCrashRecoveryWithTruncation(t *testing.T) { testCrashRecovery(t, true, false) }

// TestCrashRecoveryWithSideRecords: the writers also write side records
// (side.go) between their batches and sync some; every side record a Sync
// covered survives, none is invented, and the records around them read
// as before. With truncation too (stale side records in spares).
func TestCrashRecoveryWithSideRecords(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testCrashRecovery(t, false, true) })
	t.Run("truncate", func(t *testing.T) { testCrashRecovery(t, true, true) })
}

func testCrashRecovery(t *testing.T, truncate, withSide bool) {
	seeds := seedCount(t, 16)
	for _, p := range []Policy{PolicySync, PolicyCaller, PolicyNone} {
		runSeeds(t, p.String()+"/", seeds, func(t *testing.T, seed int) {
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(p)))
			fs := newCrashFS()
			opts := Options{Policy: p, SegmentSize: 4 << 10 << rng.IntN(3), IndexInterval: 64 << rng.IntN(4), FS: fs,
				Compression: Compression(seed % 3),   // from the seed: other draws stay as they were
				NoRecycle:   truncate && seed%4 == 3} // unlink instead of recycle now and then
			dir := t.TempDir()
			m := newModel()
			var side *sideModel
			if withSide {
				side = newSideModel(!truncate)
			}
			var durable Seq
			for round := 0; round < 3; round++ {
				l, err := Open(dir, opts)
				if err != nil {
					t.Fatalf("round %d: open after crash: %v", round, err)
				}
				m.check(t, l, durable)
				side.check(t, l)
				durable = crashRound(t, rng, l, fs, m, round, truncate, side)
			}
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatalf("final open: %v", err)
			}
			defer l.Close()
			m.check(t, l, durable)
			side.check(t, l)
		})
	}
}
