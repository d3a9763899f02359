package seglog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// recordSpan is where one record's checked bytes sit on disk.
type recordSpan struct {
	path     string
	off, len int64
	seq      Seq
}

// diskRecords walks every segment file of dir and lists its records.
func diskRecords(t *testing.T, dir string) []recordSpan {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*"+segExt))
	sort.Strings(names)
	var spans []recordSpan
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for off := int64(segHeaderSize); off+recHeaderSize <= int64(len(b)); {
			h, st := checkRecord(b, off)
			if st != recOK {
				break
			}
			spans = append(spans, recordSpan{name, off, recHeaderSize + int64(h.metaLen) + int64(h.dataLen), h.seq})
			off += h.size()
		}
	}
	return spans
}

func flipBit(t *testing.T, path string, off int64, bit uint) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1 << bit
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestFlippedBitIsNeverData flips one bit in a random record and checks that
// the log either refuses to open with ErrCorrupt or reports ErrCorrupt for
// that record, and never returns wrong bytes.
func TestFlippedBitIsNeverData(t *testing.T) {
	for seed := range seedCount(t, 40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 99))
			clean := seed%2 == 0
			opts := Options{SegmentSize: 4 << 10, IndexInterval: 256, Policy: PolicyNone}
			dir := t.TempDir()
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			m := newModel()
			for i := 0; i < 30; i++ {
				batch := randomBatch(rng, fmt.Sprint("b", i), 5)
				first, err := l.Append(batch)
				if err != nil {
					t.Fatal(err)
				}
				m.appended(first, batch)
			}
			if seed%4 == 1 {
				if _, err := l.Sync(); err != nil { // everything confirmed
					t.Fatal(err)
				}
			}
			_, last := l.Bounds()
			durable := l.Durable()
			if clean {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				l.Abandon()
			}
			spans := diskRecords(t, dir)
			victim := spans[rng.IntN(len(spans))]
			if rng.IntN(2) == 0 { // half the time, hit the scanned last segment
				lastPath := spans[len(spans)-1].path
				var tail []recordSpan
				for _, s := range spans {
					if s.path == lastPath {
						tail = append(tail, s)
					}
				}
				victim = tail[rng.IntN(len(tail))]
			}
			flipBit(t, victim.path, victim.off+rng.Int64N(victim.len), uint(rng.IntN(8)))

			l2, err := Open(dir, opts)
			if err != nil {
				var ce *CorruptError
				if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || ce.Path != victim.path {
					t.Fatalf("open: %v; want a *CorruptError in %s", err, victim.path)
				}
				t.Log("path: refused")
				checkSkipCorrupt(t, dir, opts, m, victim)
				return
			}
			defer l2.Close()
			if _, last2 := l2.Bounds(); last2 != last {
				// Only a record never made durable can pass for a torn
				// write (after an unclean stop, PolicyNone: the ones
				// since the last roll), and the log ends before it.
				rec := l2.Recovery()
				t.Log("path: cut")
				if victim.seq <= durable || last2 != victim.seq-1 || rec.TruncatedBytes == 0 || clean {
					t.Fatalf("last %d -> %d after flipping a bit in %d, durable %d (recovery %+v)", last, last2, victim.seq, durable, rec)
				}
				return
			}
			sawVictim := false
			for seq := Seq(1); seq <= last; seq++ {
				r, err := l2.Read(seq)
				if err != nil {
					if !errors.Is(err, ErrCorrupt) {
						t.Fatalf("read %d: %v", seq, err)
					}
					sawVictim = sawVictim || seq == victim.seq
					continue
				}
				if seq == victim.seq || !sameEntry(r, m.ok[seq]) {
					t.Fatalf("read %d returned data from a damaged record", seq)
				}
			}
			t.Log("path: read")
			if !sawVictim {
				t.Fatalf("the damaged record %d was never reported", victim.seq)
			}
		})
	}
}

// refusedThenSkipped checks that Open refuses dir with a *CorruptError that
// ok accepts (want describes it), then returns the log Open gives with
// SkipCorrupt (closed at the end of the test).
func refusedThenSkipped(t *testing.T, dir string, opts Options, ok func(*CorruptError) bool, want string) *Log {
	t.Helper()
	_, err := Open(dir, opts)
	var ce *CorruptError
	if !errors.As(err, &ce) || !ok(ce) {
		t.Fatalf("open: %v; want %s", err, want)
	}
	opts.SkipCorrupt = true
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// checkSkipCorrupt reopens a log that Open refused with SkipCorrupt and
// checks that the damage is reported and skipped, and the rest intact.
func checkSkipCorrupt(t *testing.T, dir string, opts Options, m *model, victim recordSpan) {
	t.Helper()
	opts.SkipCorrupt = true
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open with SkipCorrupt: %v", err)
	}
	defer l.Close()
	rec := l.Recovery()
	if len(rec.Skipped) == 0 || rec.Skipped[0].Path != victim.path {
		t.Fatalf("SkipCorrupt open reports no skipped range: %+v", rec)
	}
	if _, err := l.Read(victim.seq); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of skipped record %d: %v, want ErrCorrupt", victim.seq, err)
	}
	_, last := l.Bounds()
	n := 0
	err = l.Scan(1, 0, func(r Record) bool {
		if r.Seq == victim.seq || !sameEntry(r, m.ok[r.Seq]) {
			t.Fatalf("scan returned damaged record %d", r.Seq)
		}
		n++
		return true
	})
	if err != nil {
		t.Fatalf("scan over a skipped range: %v", err)
	}
	if n == 0 || Seq(n) > last {
		t.Fatalf("scan passed %d records, last %d", n, last)
	}
	// The log keeps working.
	if _, err := l.Append([]Entry{entry(1)}); err != nil {
		t.Fatal(err)
	}
}

func TestDamagedFiles(t *testing.T) {
	tests := []struct {
		name    string
		damage  func(t *testing.T, dir string)
		wantErr bool // Open must fail with ErrCorrupt; otherwise it must recover fully
	}{
		{"segment-header", func(t *testing.T, dir string) {
			flipBit(t, filepath.Join(dir, segName(1)), 3, 0)
		}, true},
		{"last-segment-header", func(t *testing.T, dir string) {
			spans := diskRecords(t, dir)
			flipBit(t, spans[len(spans)-1].path, 9, 4)
		}, true},
		{"index-file", func(t *testing.T, dir string) {
			flipBit(t, idxPath(dir, 1), 50, 2)
		}, false},
		{"missing-index", func(t *testing.T, dir string) {
			if err := os.Remove(idxPath(dir, 1)); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"clean-marker", func(t *testing.T, dir string) {
			flipBit(t, filepath.Join(dir, cleanName), 20, 1)
		}, false},
		{"missing-middle-segment", func(t *testing.T, dir string) {
			spans := diskRecords(t, dir)
			mid := spans[len(spans)/2].path
			if mid == spans[len(spans)-1].path || mid == spans[0].path {
				t.Fatal("test setup: want at least three segments")
			}
			if err := os.Remove(mid); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"zeroed-sealed-record", func(t *testing.T, dir string) {
			os.Remove(idxPath(dir, 1)) // force a scan of the sealed segment
			s := diskRecords(t, dir)[3]
			f, _ := os.OpenFile(s.path, os.O_RDWR, 0)
			f.WriteAt(make([]byte, s.len), s.off)
			f.Close()
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{SegmentSize: 4 << 10}
			dir := t.TempDir()
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			fill(t, l, 1, 300, 6)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			tc.damage(t, dir)
			l2, err := Open(dir, opts)
			if tc.wantErr {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("open: %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Close()
			verifyAll(t, l2, 1, 300)
		})
	}
}

// tornAfterFifty writes records 1..50 with opts, stops without a clean
// close and tears the final record (its first half kept), returning the
// directory and where that record was.
func tornAfterFifty(t *testing.T, opts Options) (string, recordSpan) {
	t.Helper()
	l, dir := openTest(t, opts)
	fill(t, l, 1, 50, 5)
	l.Abandon()
	spans := diskRecords(t, dir)
	lastRec := spans[len(spans)-1]
	if err := os.Truncate(lastRec.path, lastRec.off+lastRec.len/2); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(lastRec.path, opts.SegmentSize); err != nil {
		t.Fatal(err)
	}
	return dir, lastRec
}

func TestTornTailIsCutAndReported(t *testing.T) {
	opts := Options{SegmentSize: 64 << 10, Policy: PolicyNone} // never fsynced: a write a crash may tear
	dir, lastRec := tornAfterFifty(t, opts)
	l2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	rec := l2.Recovery()
	if rec.TruncatedAt != lastRec.off || rec.TruncatedBytes == 0 || rec.TruncatedPath != lastRec.path {
		t.Fatalf("recovery %+v; want a cut at %d", rec, lastRec.off)
	}
	verifyAll(t, l2, 1, 49)
	fill(t, l2, 50, 60, 3)
	verifyAll(t, l2, 1, 60)
}

// TestTornDurableRecordIsCorruption: the same damage to a record the log
// had fsynced (its durable-point hint says so) cannot be a torn write:
// Open refuses with a *CorruptError for it instead of cutting it.
func TestTornDurableRecordIsCorruption(t *testing.T) {
	opts := Options{SegmentSize: 64 << 10, Policy: PolicySync}
	dir, lastRec := tornAfterFifty(t, opts)
	// Refused; with SkipCorrupt it opens, reports the range and keeps the rest.
	l2 := refusedThenSkipped(t, dir, opts, func(ce *CorruptError) bool { return ce.Seq == 50 && ce.Offset == lastRec.off },
		fmt.Sprintf("a *CorruptError for seq 50 at %d", lastRec.off))
	if rec := l2.Recovery(); len(rec.Skipped) != 1 || rec.Skipped[0].From != 50 || rec.Skipped[0].To != 50 || rec.DurableHint != 50 {
		t.Fatalf("recovery %+v; want seq 50 skipped, hint 50", rec)
	}
	// The confirmed record stays in the log as a hole that reads as
	// corrupt; appends go on after it.
	if _, last := l2.Bounds(); last != 50 {
		t.Fatalf("last %d; want 50", last)
	}
	if _, err := l2.Read(50); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read 50: %v; want ErrCorrupt", err)
	}
	for seq := Seq(1); seq < 50; seq++ {
		if r, err := l2.Read(seq); err != nil || !bytes.Equal(r.Data, entry(int(seq)).Data) {
			t.Fatalf("read %d: %v", seq, err)
		}
	}
	if first, err := l2.Append([]Entry{entry(51)}); err != nil || first != 51 {
		t.Fatalf("append after the hole: %d, %v", first, err)
	}
}
