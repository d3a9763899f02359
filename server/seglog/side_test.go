package seglog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/fibrilmq/fibril/internal/crashfs"
)

// sideData is the side record written after record n (the k-th there).
func sideData(n, k int) []byte { return bytes.Repeat(fmt.Appendf(nil, "[side %d.%d]", n, k), n%5+1) }

// fillWithSides appends records 1..n one batch of 3 at a time and, after
// batch ending at i, i%4 side records (none fit in a fresh, empty log).
func fillWithSides(t *testing.T, l *Log, n int) (sides int) {
	t.Helper()
	for i := 1; i <= n; i += 3 {
		var b []Entry
		for j := i; j < i+3 && j <= n; j++ {
			b = append(b, entry(j))
		}
		if _, err := l.Append(b); err != nil {
			t.Fatal(err)
		}
		end := i + len(b) - 1
		for k := 0; k < end%4; k++ {
			mark, err := l.AppendSide(Entry{Meta: []byte("s"), Data: sideData(end, k), Time: int64(end)})
			if errors.Is(err, ErrSideNoRoom) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			sides++
			if mark != uint64(sides) {
				t.Fatalf("side mark %d, want %d", mark, sides)
			}
		}
	}
	return sides
}

// verifySides checks that ScanSide(from) gives the side records of
// fillWithSides in order, each numbered by the record after it, and
// returns how many it gave.
func verifySides(t *testing.T, l *Log, from Seq) int {
	t.Helper()
	n := 0
	prev, k := Seq(0), 0
	err := l.ScanSide(from, func(r Record) bool {
		if r.Seq < from {
			t.Fatalf("side record numbered %d, asked from %d", r.Seq, from)
		}
		if r.Seq == prev {
			k++
		} else {
			k = 0
		}
		if r.Seq < prev {
			t.Fatalf("side record %d after %d", r.Seq, prev)
		}
		prev = r.Seq
		after := int(r.Seq) - 1
		if !bytes.Equal(r.Data, sideData(after, k)) || string(r.Meta) != "s" || r.Time != int64(after) {
			t.Fatalf("side record at %d (#%d there) holds %q", r.Seq, k, r.Data)
		}
		n++
		return true
	})
	if err != nil {
		t.Fatalf("scan side: %v", err)
	}
	return n
}

// TestSideRecordsInvisibleToReads: side records between records change
// nothing Read and Scan return, before and after a clean or unclean
// reopen, and ScanSide gives them all back, from any point.
func TestSideRecordsInvisibleToReads(t *testing.T) {
	opts := Options{SegmentSize: 4 << 10, IndexInterval: 1024} // reads walk through side records
	l, dir := openTest(t, opts)
	sides := fillWithSides(t, l, 400)
	if len(l.segs) < 5 || sides < 100 {
		t.Fatalf("%d segments, %d side records: the test wants more", len(l.segs), sides)
	}
	check := func(l *Log, what string) {
		t.Helper()
		for i := 400; i >= 1; i -= 7 { // backwards: the index search, not the forward hint
			r, err := l.Read(Seq(i))
			if err != nil {
				t.Fatalf("%s: read %d: %v", what, i, err)
			}
			wantRecord(t, r, Seq(i), i)
		}
		verifyAll(t, l, 1, 400)
		if got := verifySides(t, l, 1); got != sides {
			t.Fatalf("%s: ScanSide gave %d side records, %d were written", what, got, sides)
		}
		if got, all := verifySides(t, l, 300), verifySides(t, l, 1); got == 0 || got >= all {
			t.Fatalf("%s: ScanSide from 300 gave %d of %d", what, got, all)
		}
	}
	check(l, "written")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	check(l, "clean reopen")
	fill(t, l, 401, 410, 5) // appends after side records at the end of the last segment
	verifyAll(t, l, 1, 410)
	l.Abandon()
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if rec := l.Recovery(); rec.ScannedBytes == 0 {
		t.Fatalf("unclean reopen did not scan: %+v", rec)
	}
	verifyAll(t, l, 1, 410)
	if got := verifySides(t, l, 1); got != sides {
		t.Fatalf("after the scan ScanSide gave %d side records, %d were written", got, sides)
	}
}

// TestSideRecordsInCompressedSegments: sealed segments holding side
// records compress, read back and give their side records back.
func TestSideRecordsInCompressedSegments(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			opts := Options{SegmentSize: 4 << 10, IndexInterval: 96, Compression: c}
			l, _ := openTest(t, opts)
			sides := fillWithSides(t, l, 400)
			waitFor(t, "sealed segments compressed", func() bool { return allSealedCompressed(l) })
			verifyAll(t, l, 1, 400)
			if got := verifySides(t, l, 1); got != sides {
				t.Fatalf("ScanSide gave %d side records, %d were written", got, sides)
			}
		})
	}
}

// TestAppendSideNoRoom: a side record never starts a segment: not in an
// empty log, not past the end of the active segment; nothing is written
// then and the records that follow go on as usual.
func TestAppendSideNoRoom(t *testing.T) {
	l, _ := openTest(t, Options{SegmentSize: 4 << 10})
	if _, err := l.AppendSide(Entry{Data: []byte("x")}); !errors.Is(err, ErrSideNoRoom) {
		t.Fatalf("side record in an empty log: %v", err)
	}
	fill(t, l, 1, 1, 1)
	if _, err := l.AppendSide(Entry{Data: []byte("x")}); err != nil {
		t.Fatalf("side record after a record: %v", err)
	}
	before := l.Segments()
	big := Entry{Data: make([]byte, 4<<10-segHeaderSize-recHeaderSize-40)}
	if _, err := l.AppendSide(big); !errors.Is(err, ErrSideNoRoom) {
		t.Fatalf("side record past the segment's end: %v", err)
	}
	if after := l.Segments(); len(after) != len(before) || after[0].Bytes != before[0].Bytes {
		t.Fatalf("a refused side record changed the log: %+v -> %+v", before, after)
	}
	fill(t, l, 2, 40, 3)
	verifyAll(t, l, 1, 40)
	if n := countSides(t, l); n != 1 {
		t.Fatalf("%d side records, want 1", n)
	}
}

func countSides(t *testing.T, l *Log) int {
	t.Helper()
	n := 0
	if err := l.ScanSide(1, func(Record) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSyncCoversSideRecords: Sync makes a side record durable even when
// no record was written after it (the durable point does not move); one
// written after the last Sync is lost in a crash that drops what was
// never synced.
func TestSyncCoversSideRecords(t *testing.T) {
	for _, p := range []Policy{PolicyNone, PolicyCaller} {
		t.Run(p.String(), func(t *testing.T) {
			fs := newCrashFS()
			opts := Options{Policy: p, SegmentSize: 64 << 10, FS: fs}
			l, dir := openTest(t, opts)
			fill(t, l, 1, 5, 5)
			if _, err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			mark, err := l.AppendSide(Entry{Data: []byte("kept")})
			if err != nil {
				t.Fatal(err)
			}
			if l.DurableSide() >= mark {
				t.Fatalf("side mark %d durable before any fsync", mark)
			}
			if _, err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if got := l.DurableSide(); got != mark {
				t.Fatalf("durable side mark %d after Sync, want %d", got, mark)
			}
			if _, err := l.AppendSide(Entry{Data: []byte("lost")}); err != nil {
				t.Fatal(err)
			}
			l.Abandon()
			if _, err := fs.Crash(nil, crashfs.CrashDropAll); err != nil {
				t.Fatal(err)
			}
			l, err = Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var got []string
			if err := l.ScanSide(1, func(r Record) bool { got = append(got, string(r.Data)); return true }); err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != "kept" {
				t.Fatalf("side records after the crash: %q, want [kept]", got)
			}
			verifyAll(t, l, 1, 5)
		})
	}
}

// sideModel is the crash test's record of side records (crash_test.go).
type sideModel struct {
	mu        sync.Mutex
	mustKeep  bool // no truncation: every confirmed side record survives
	n         int
	all       map[string]*sideEntry // by Meta, unique
	confirmed map[string]bool
}

type sideEntry struct {
	e     Entry
	round int
	mark  uint64 // 0: its write failed (it may survive, never confirmed)
}

func newSideModel(mustKeep bool) *sideModel {
	return &sideModel{mustKeep: mustKeep, all: map[string]*sideEntry{}, confirmed: map[string]bool{}}
}

// append writes a side record (maybe refused, maybe failing under the
// round's faults) and sometimes syncs.
func (m *sideModel) append(t *testing.T, rng *rand.Rand, l *Log, round int) {
	m.mu.Lock()
	m.n++
	tag := fmt.Sprintf("side-%d-%d", round, m.n)
	m.mu.Unlock()
	data := make([]byte, rng.IntN(400))
	for j := range data {
		data[j] = byte(rng.UintN(255) + 1)
	}
	e := Entry{Meta: []byte(tag), Data: data, Time: rng.Int64N(1<<40) + 1}
	mark, err := l.AppendSide(e)
	switch {
	case err == nil:
	case errors.Is(err, ErrSideNoRoom):
		return
	case errors.Is(err, ErrWriteFailed) || errors.Is(err, ErrSyncFailed):
		mark = 0
	default:
		t.Errorf("append side: unexpected error %v", err)
		return
	}
	m.mu.Lock()
	m.all[tag] = &sideEntry{e: e, round: round, mark: mark}
	m.mu.Unlock()
	if rng.IntN(3) == 0 {
		_, _ = l.Sync() // may fail under the round's faults
	}
}

// crashed confirms the side records of round that the log reported durable.
func (m *sideModel) crashed(round int, durable uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for tag, se := range m.all {
		if se.round == round && se.mark > 0 && se.mark <= durable {
			m.confirmed[tag] = true
		}
	}
}

// check verifies a reopened log's side records: each is one that was
// written, with its content, in the order written; every confirmed one
// is there (unless truncation may have dropped it). Those gone are
// forgotten.
func (m *sideModel) check(t *testing.T, l *Log) {
	t.Helper()
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	var prevRound int
	var prevMark uint64
	err := l.ScanSide(1, func(r Record) bool {
		se := m.all[string(r.Meta)]
		if se == nil || !sameEntry(r, se.e) {
			t.Fatalf("side record %q (before seq %d) was never written", r.Meta, r.Seq)
		}
		if se.mark > 0 {
			if se.round < prevRound || (se.round == prevRound && se.mark <= prevMark) {
				t.Fatalf("side record %q (round %d, mark %d) after round %d mark %d", r.Meta, se.round, se.mark, prevRound, prevMark)
			}
			prevRound, prevMark = se.round, se.mark
		}
		seen[string(r.Meta)] = true
		return true
	})
	if err != nil {
		t.Fatalf("scan side records after recovery: %v", err)
	}
	for tag := range m.confirmed {
		if !seen[tag] {
			if m.mustKeep {
				t.Fatalf("confirmed side record %q lost", tag)
			}
			delete(m.confirmed, tag)
		}
	}
	for tag := range m.all {
		if !seen[tag] {
			delete(m.all, tag)
		}
	}
}
