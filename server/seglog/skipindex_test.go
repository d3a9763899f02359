package seglog

import (
	"errors"
	"os"
	"testing"
)

// TestSkippedRangeNeedsSkipCorruptOnEveryOpen is the regression test for
// "a damaged sealed segment opened with SkipCorrupt gets no index file, so
// every later Open scans it again and needs SkipCorrupt again". The index
// now records the ranges skipped, so a later Open takes the segment as it
// was recovered, without SkipCorrupt, and reports the ranges again.
func TestSkippedRangeNeedsSkipCorruptOnEveryOpen(t *testing.T) {
	for _, where := range []string{"middle", "end"} {
		t.Run(where, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{SegmentSize: MinSegmentSize}
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			fill(t, l, 1, 300, 10)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			spans := diskRecords(t, dir)
			var inFirst []recordSpan
			for _, sp := range spans {
				if sp.path == spans[0].path {
					inFirst = append(inFirst, sp)
				}
			}
			if len(inFirst) == len(spans) || len(inFirst) < 4 {
				t.Fatalf("want several records in a sealed first segment, got %d of %d", len(inFirst), len(spans))
			}
			victim := inFirst[len(inFirst)/2]
			if where == "end" {
				victim = inFirst[len(inFirst)-1]
			}
			flipBit(t, victim.path, victim.off+recHeaderSize, 3)
			if err := os.Remove(idxPath(dir, 1)); err != nil { // so Open scans it
				t.Fatal(err)
			}
			if _, err := Open(dir, opts); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("open of the damaged log: %v, want ErrCorrupt", err)
			}
			skipOpts := opts
			skipOpts.SkipCorrupt = true
			if l, err = Open(dir, skipOpts); err != nil {
				t.Fatal(err)
			}
			first := l.Recovery().Skipped
			if len(first) == 0 || first[0].Recorded {
				t.Fatalf("SkipCorrupt open: skipped %+v", first)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}

			for round := 0; round < 2; round++ {
				if l, err = Open(dir, opts); err != nil {
					t.Fatalf("round %d: open without SkipCorrupt after the damage was skipped once: %v", round, err)
				}
				rec := l.Recovery()
				if rec.RebuiltIndexes != 0 || len(rec.Skipped) != len(first) {
					t.Fatalf("round %d: rebuilt %d indexes, skipped %+v; want 0 and %+v", round, rec.RebuiltIndexes, rec.Skipped, first)
				}
				for i, r := range rec.Skipped {
					want := first[i]
					want.Recorded = true
					if r != want {
						t.Fatalf("round %d: skipped[%d] = %+v, want %+v", round, i, r, want)
					}
				}
				if _, err := l.Read(victim.seq); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("read of the lost record %d: %v, want ErrCorrupt", victim.seq, err)
				}
				n := 0
				err := l.Scan(1, 0, func(r Record) bool {
					if r.Seq == victim.seq {
						t.Fatalf("scan returned the lost record %d", r.Seq)
					}
					wantRecord(t, r, r.Seq, int(r.Seq))
					n++
					return true
				})
				if want := 299 + 10*round; err != nil || n != want {
					t.Fatalf("round %d: scan passed %d records (%v), want %d", round, n, err, want)
				}
				if round == 0 {
					fill(t, l, 301, 310, 5) // the log keeps working
				} else {
					verifyAfter(t, l, 301, 310)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func verifyAfter(t *testing.T, l *Log, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		r, err := l.Read(Seq(i))
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		wantRecord(t, r, Seq(i), i)
	}
}
