package seglog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spanOf returns where record seq sits on disk.
func spanOf(t *testing.T, dir string, seq Seq) recordSpan {
	t.Helper()
	for _, r := range diskRecords(t, dir) {
		if r.seq == seq {
			return r
		}
	}
	t.Fatalf("record %d not on disk", seq)
	return recordSpan{}
}

// zeroRange writes n zero bytes at off of path.
func zeroRange(t *testing.T, path string, off, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, n), off); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedRecordCostsItsNeighbours is the regression test for "one
// flipped bit made every record up to the next index point unreadable": a
// read walking from an index point to its record stopped at the first
// damaged record on the way. Now only the damaged records read as
// ErrCorrupt; every intact neighbour reads back.
func TestDamagedRecordCostsItsNeighbours(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, r recordSpan)
	}{
		{"data bit", func(t *testing.T, r recordSpan) { flipBit(t, r.path, r.off+r.len-1, 3) }},
		{"header bit", func(t *testing.T, r recordSpan) { flipBit(t, r.path, r.off+4, 0) }},
		{"zeroed header", func(t *testing.T, r recordSpan) { zeroRange(t, r.path, r.off, recHeaderSize) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// One index point for the whole segment: every read walks
			// from the segment's start.
			opts := Options{SegmentSize: 1 << 20, IndexInterval: 1 << 20}
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			fill(t, l, 1, 200, 10)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			bad := map[Seq]bool{40: true, 41: true, 120: true}
			spans := map[Seq]recordSpan{}
			for seq := range bad {
				spans[seq] = spanOf(t, dir, seq)
			}
			for seq := range bad {
				tc.damage(t, spans[seq])
			}
			l, err = Open(dir, opts) // clean: the damage is not scanned
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for seq := Seq(1); seq <= 200; seq++ {
				r, err := l.Read(seq)
				if bad[seq] {
					if !errors.Is(err, ErrCorrupt) {
						t.Fatalf("read of damaged %d: %v", seq, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("read of intact %d: %v", seq, err)
				}
				wantRecord(t, r, seq, int(seq))
			}
		})
	}
}

// TestVerifyOnOpenFindsDamage damages records of sealed segments (plain
// and compressed) and of the cleanly closed last segment, none of which
// Open scans by default: with Options.Verify, Open fails with a
// *CorruptError naming the file and the sequence number; without, it
// opens and the damaged record reads as ErrCorrupt. VerifySegments on an
// open log finds the same damage in sealed segments.
func TestVerifyOnOpenFindsDamage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		comp   Compression
		seq    Seq // damaged record
		damage func(t *testing.T, dir string, r recordSpan)
		scrub  bool // VerifySegments finds it (sealed segments only)
	}{
		{"sealed data bit", CompressionNone, 30, func(t *testing.T, _ string, r recordSpan) { flipBit(t, r.path, r.off+r.len-1, 1) }, true},
		{"sealed zeroed 4k", CompressionNone, 80, func(t *testing.T, _ string, r recordSpan) {
			if r.off < 4096 {
				t.Fatalf("record at %d: pick one in the second block", r.off)
			}
			zeroRange(t, r.path, r.off&^4095, 4096)
		}, true},
		{"last data bit", CompressionNone, 1195, func(t *testing.T, _ string, r recordSpan) { flipBit(t, r.path, r.off+r.len-1, 1) }, false},
		{"compressed body", CompressionS2, 30, func(t *testing.T, dir string, _ recordSpan) {
			names, _ := filepath.Glob(filepath.Join(dir, "*"+segExt+CompressionS2.ext()))
			if len(names) == 0 {
				t.Fatal("no compressed segment")
			}
			fi, err := os.Stat(names[0])
			if err != nil {
				t.Fatal(err)
			}
			flipBit(t, names[0], fi.Size()-10, 2)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{SegmentSize: 8 << 10, IndexInterval: 256, Compression: tc.comp}
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			fill(t, l, 1, 1200, 40)
			if tc.comp != CompressionNone {
				waitFor(t, "compression", func() bool { return allSealedCompressed(l) })
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			var r recordSpan
			if tc.comp == CompressionNone {
				r = spanOf(t, dir, tc.seq)
			}
			tc.damage(t, dir, r)

			vopts := opts
			vopts.Verify = true
			_, err = Open(dir, vopts)
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("Open with Verify: %v, want a *CorruptError", err)
			}
			if tc.comp == CompressionNone && (ce.Path != r.path || ce.Seq > tc.seq) {
				t.Fatalf("Open with Verify named %s seq %d, want %s seq <= %d", ce.Path, ce.Seq, r.path, tc.seq)
			}
			if tc.comp != CompressionNone && !strings.HasSuffix(ce.Path, CompressionS2.ext()) {
				t.Fatalf("Open with Verify named %s, want the compressed segment", ce.Path)
			}

			l, err = Open(dir, opts)
			if err != nil {
				t.Fatalf("Open without Verify: %v", err)
			}
			defer l.Close()
			if _, err := l.Read(tc.seq); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("read of damaged %d: %v", tc.seq, err)
			}
			next, n, err := l.VerifySegments(1, 0)
			if tc.scrub {
				if !errors.Is(err, ErrCorrupt) || n == 0 {
					t.Fatalf("VerifySegments: next %d, %d bytes, %v; want ErrCorrupt", next, n, err)
				}
			} else if err != nil || next != 0 || n == 0 {
				t.Fatalf("VerifySegments of intact sealed segments: next %d, %d bytes, %v", next, n, err)
			}
		})
	}
}

// TestVerifyOnOpenAcceptsIntactLogs opens intact logs (plain, compressed,
// with side records, after SkipCorrupt recorded a damaged range) with
// Options.Verify: nothing is refused and every record reads back.
func TestVerifyOnOpenAcceptsIntactLogs(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 8 << 10, IndexInterval: 256, Compression: CompressionZstd}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 1, 600, 30)
	waitFor(t, "compression", func() bool { return allSealedCompressed(l) })
	fill(t, l, 601, 700, 30)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	opts.Verify = true
	for range 2 { // clean, then after a Close that wrote the index again
		l, err = Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		verifyAll(t, l, 1, 700)
		if next, n, err := l.VerifySegments(1, 2); err != nil || next == 0 || n == 0 {
			t.Fatalf("VerifySegments(1, 2): next %d, %d bytes, %v", next, n, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// A range skipped with SkipCorrupt is recorded in the index and
	// stepped over by verification.
	dir = t.TempDir()
	popts := Options{SegmentSize: 8 << 10, IndexInterval: 256}
	l, err = Open(dir, popts)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 1, 300, 20)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	flipBit(t, spanOf(t, dir, 20).path, spanOf(t, dir, 20).off+40, 0)
	popts.Verify, popts.SkipCorrupt = true, true
	l, err = Open(dir, popts)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Recovery().Skipped) != 1 {
		t.Fatalf("skipped %+v", l.Recovery().Skipped)
	}
	l.Close()
	popts.SkipCorrupt = false
	l, err = Open(dir, popts)
	if err != nil {
		t.Fatalf("reopen with Verify after SkipCorrupt: %v", err)
	}
	defer l.Close()
	if _, _, err := l.VerifySegments(1, 0); err != nil {
		t.Fatalf("VerifySegments after SkipCorrupt: %v", err)
	}
}

// TestMissingRecordsNameTheRightFile is the regression test for "a deleted
// middle segment is reported against the segment before it": the refusal
// now names the deleted file, and a segment whose end was cut off is named
// itself.
func TestMissingRecordsNameTheRightFile(t *testing.T) {
	setup := func(t *testing.T) (string, []SegmentInfo) {
		dir := t.TempDir()
		l, err := Open(dir, Options{SegmentSize: 8 << 10, IndexInterval: 256})
		if err != nil {
			t.Fatal(err)
		}
		fill(t, l, 1, 600, 20)
		segs := l.Segments()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return dir, segs
	}
	t.Run("deleted", func(t *testing.T) {
		dir, segs := setup(t)
		gone := filepath.Join(dir, segName(segs[2].First))
		os.Remove(gone)
		os.Remove(idxPath(dir, segs[2].First))
		_, err := Open(dir, Options{SegmentSize: 8 << 10})
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Path != gone || !strings.Contains(ce.Reason, "deleted") {
			t.Fatalf("Open: %v; want a *CorruptError naming %s", err, gone)
		}
	})
	t.Run("cut short", func(t *testing.T) {
		dir, segs := setup(t)
		cut := filepath.Join(dir, segName(segs[2].First))
		r := spanOf(t, dir, segs[2].Last)
		zeroRange(t, cut, r.off, r.len)
		_, err := Open(dir, Options{SegmentSize: 8 << 10, Verify: true})
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Path != cut || ce.Seq != segs[2].Last {
			t.Fatalf("Open: %v; want a *CorruptError naming %s seq %d", err, cut, segs[2].Last)
		}
	})
}

// dirState maps each file of dir to its contents.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(n)] = string(b)
	}
	return out
}

// TestReadOnlyChangesNothing opens a damaged log (a flipped bit in a sealed
// segment, a deleted index, a leftover temporary file, a torn tail) with
// ReadOnly, Verify and SkipCorrupt: Recovery lists the damage and the torn
// tail, intact records read back, writes fail with ErrReadOnly, and not
// one byte of the directory changed. A log open for writing is ErrLocked.
func TestReadOnlyChangesNothing(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 8 << 10, IndexInterval: 256, Policy: PolicyNone}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 1, 400, 20)
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([]Entry{entry(401)}); err != nil {
		t.Fatal(err)
	}
	ro := Options{ReadOnly: true, Verify: true, SkipCorrupt: true}
	if _, err := Open(dir, ro); !errors.Is(err, ErrLocked) {
		t.Fatalf("read-only Open of a log open for writing: %v, want ErrLocked", err)
	}
	segs := l.Segments()
	last := spanOf(t, dir, 401)
	l.Abandon() // a crash: 401 was never synced
	zeroRange(t, last.path, last.off+8, 8)
	victim := spanOf(t, dir, 30)
	flipBit(t, victim.path, victim.off+victim.len-1, 0)
	os.Remove(idxPath(dir, segs[1].First))
	os.WriteFile(filepath.Join(dir, "x.tmp"), []byte("left over"), 0o644)
	before := dirState(t, dir)

	l, err = Open(dir, ro)
	if err != nil {
		t.Fatal(err)
	}
	rec := l.Recovery()
	if len(rec.Skipped) != 1 || rec.Skipped[0].From != 30 || rec.Skipped[0].To != 30 {
		t.Fatalf("Skipped = %+v, want seq 30", rec.Skipped)
	}
	if rec.TruncatedBytes == 0 || rec.RebuiltIndexes == 0 {
		t.Fatalf("Recovery = %+v, want the torn tail and the rebuilt index reported", rec)
	}
	if _, err := l.Read(31); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([]Entry{entry(1)}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Append on a read-only log: %v", err)
	}
	if err := l.TruncateFront(100); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("TruncateFront on a read-only log: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	after := dirState(t, dir)
	if len(after) != len(before) {
		t.Fatalf("files before %d, after %d", len(before), len(after))
	}
	for n, b := range before {
		if after[n] != b {
			t.Fatalf("%s changed", n)
		}
	}
}

// TestDeletedFrontSegmentRefused is the regression test for "deleting the
// first segment file looks like retention": the log kept no trace of its
// front, so Open started at the next segment and the records were gone
// without a word. Now TruncateFront records the front (fsynced) before it
// removes a segment, and a first segment above it is refused, naming the
// deleted file; SkipCorrupt records the range as lost, listed again by
// every later Open.
func TestDeletedFrontSegmentRefused(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 8 << 10, IndexInterval: 256}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 1, 600, 20)
	segs := l.Segments()
	if err := l.TruncateFront(segs[1].First); err != nil { // retention: allowed
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatalf("Open after TruncateFront: %v", err)
	}
	l.Close()
	gone := filepath.Join(dir, segName(segs[1].First))
	os.Remove(gone)
	os.Remove(idxPath(dir, segs[1].First))
	_, err = Open(dir, opts)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Path != gone || ce.Seq != segs[1].First {
		t.Fatalf("Open without the front segment: %v; want a *CorruptError naming %s", err, gone)
	}
	if ro, err := Open(dir, Options{ReadOnly: true, SkipCorrupt: true}); err != nil {
		t.Fatal(err)
	} else {
		ro.Close()
	}
	sk := opts
	sk.SkipCorrupt = true
	l, err = Open(dir, sk)
	if err != nil {
		t.Fatal(err)
	}
	if s := l.Recovery().Skipped; len(s) != 1 || s[0].From != segs[1].First || s[0].To != segs[1].Last || s[0].Recorded {
		t.Fatalf("Skipped = %+v", s)
	}
	l.Close()
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatalf("Open after SkipCorrupt recorded the loss: %v", err)
	}
	defer l.Close()
	if s := l.Recovery().Skipped; len(s) != 1 || !s[0].Recorded || s[0].From != segs[1].First {
		t.Fatalf("Skipped after the repair = %+v", s)
	}
}

// TestSkippedTailBeforeSideRecordReopens is the regression test for "a log
// repaired with SkipCorrupt refused again": when the damaged records were
// followed only by a side record (numbered by a record never written), the
// index got an entry past the segment's last record, was refused as
// damaged at the next Open, and the scan met the damage again.
func TestSkippedTailBeforeSideRecordReopens(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 64 << 10}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 1, 50, 1)
	if _, err := l.AppendSide(Entry{Data: []byte("events")}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r49, r50 := spanOf(t, dir, 49), spanOf(t, dir, 50)
	for _, r := range []recordSpan{r49, r50} {
		flipBit(t, r.path, r.off+r.len-1, 0)
	}
	opts.Verify = true
	if _, err := Open(dir, opts); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of confirmed, damaged records: %v", err)
	}
	sk := opts
	sk.SkipCorrupt = true
	l, err = Open(dir, sk)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatalf("Open after SkipCorrupt: %v", err)
	}
	defer l.Close()
	if s := l.Recovery().Skipped; len(s) != 1 || s[0].From != 49 || s[0].To != 50 || !s[0].Recorded {
		t.Fatalf("Skipped = %+v", s)
	}
}

// TestQuickVerifyChecksWhatIsNew: with QuickVerify an Open checks only the
// segments no earlier Verify-ing Open checked (damage done since to one
// checked before is left to VerifySegments); a full Verify still finds
// it, and a lost mark (LOCK gone) makes a quick Open check everything.
func TestQuickVerifyChecksWhatIsNew(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 8 << 10, IndexInterval: 256, Verify: true, QuickVerify: true}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 1, 300, 20)
	l.Close()
	l, err = Open(dir, opts) // checks everything, records the mark
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 301, 600, 20)
	l.Close()
	r := spanOf(t, dir, 30)
	flipBit(t, r.path, r.off+r.len-1, 2)
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatalf("quick Open with damage in a segment checked before: %v", err)
	}
	if _, _, err := l.VerifySegments(1, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("VerifySegments: %v", err)
	}
	l.Close()
	full := opts
	full.QuickVerify = false
	if _, err := Open(dir, full); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("full Verify: %v", err)
	}
	// Damage in what is new is found by the quick Open.
	r590 := spanOf(t, dir, 590)
	flipBit(t, r590.path, r590.off+r590.len-1, 2)
	if _, err := Open(dir, opts); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("quick Open with damage in new segments: %v", err)
	}
	os.Remove(filepath.Join(dir, lockName))
	flipBit(t, r590.path, r590.off+r590.len-1, 2) // undo
	if _, err := Open(dir, opts); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("quick Open without its mark: %v", err)
	}
}
