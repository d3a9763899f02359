package seglog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestDurableHintInRecordFlags: the lag is rounded up, so the durable
// point a record claims is never above the one it was written under, and
// close to it; a lag too large to encode claims nothing.
func TestDurableHintInRecordFlags(t *testing.T) {
	cases := []struct {
		seq, durable Seq
		exact        bool // the lag fits the mantissa: no rounding
	}{
		{1, 0, true},
		{2, 1, true},
		{5000, 4999, true},
		{1 << 40, 1<<40 - 2047, true},
		{1 << 40, 1<<40 - 2048, false}, // 2048 = 1024<<1: still exact as a value
		{1 << 40, 1<<40 - 2049, false},
		{1 << 40, 1<<40 - 1_000_000, false},
		{1 << 40, 1<<40 - 60_000_000, false},
		{1 << 40, 0, false}, // lag 2^40: does not fit
		{3, 0, true},
	}
	for _, c := range cases {
		h := parseHeader(appendRecord(nil, c.seq, c.durable, 1, nil, []byte("x"), 0))
		if !validFlags(h.flags) {
			t.Fatalf("seq %d durable %d: flags %#x rejected", c.seq, c.durable, h.flags)
		}
		d, has := h.durableBelow()
		lag := uint64(c.seq - c.durable)
		switch {
		case lag > (1<<hintMantBits-1)<<hintMaxExp:
			if has || d != 0 {
				t.Fatalf("lag %d encoded (%d, %v); want no hint", lag, d, has)
			}
		case !has || d > c.durable:
			t.Fatalf("seq %d durable %d: claims %d (hint %v)", c.seq, c.durable, d, has)
		case c.exact && d != c.durable:
			t.Fatalf("seq %d durable %d: claims %d, want exact", c.seq, c.durable, d)
		case float64(c.durable-d) > float64(lag)/float64(1<<(hintMantBits-1)):
			t.Fatalf("seq %d durable %d: claims %d, rounded by more than 0.1%%", c.seq, c.durable, d)
		}
	}
	// Flags that are neither 0 nor a hint are damage.
	b := appendRecord(nil, 9, 8, 1, nil, []byte("x"), 0)
	b[24], b[25] = 1, 0
	if _, st := checkRecord(b, 0); st != recBadHdr {
		t.Fatalf("flags 1: status %v, want a bad header", st)
	}
}

// TestDurableHintFile: the LOCK file carries the durable point across a
// crash; a damaged hint reads as none.
func TestDurableHintFile(t *testing.T) {
	opts := Options{Policy: PolicySync}
	l, dir := openTest(t, opts)
	fill(t, l, 1, 40, 4)
	l.Abandon()
	l2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if h := l2.Recovery().DurableHint; h != 40 {
		t.Fatalf("hint %d after 40 durable records, want 40", h)
	}
	l2.Abandon()
	lock := filepath.Join(dir, lockName)
	b, err := os.ReadFile(lock)
	if err != nil || decodeDurableHint(b) != 40 {
		t.Fatalf("LOCK holds %x (%v)", b, err)
	}
	b[6] ^= 1 // inside the sequence number: the CRC no longer matches
	if err := os.WriteFile(lock, b, 0o644); err != nil {
		t.Fatal(err)
	}
	l3, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Close()
	if h := l3.Recovery().DurableHint; h != 0 {
		t.Fatalf("damaged hint read as %d, want 0", h)
	}
	verifyAll(t, l3, 1, 40)
}

// TestStaleHeaderOfDurableSegmentIsCorruption: a last segment that still
// has an older segment's header (a reused spare) was never durable, so
// Open removes it, unless the hint says records in it were durable:
// then its header was durable too, and the old one is damage.
func TestStaleHeaderOfDurableSegmentIsCorruption(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(map[bool]string{false: "never durable", true: "durable"}[durable], func(t *testing.T) {
			opts := Options{SegmentSize: 4 << 10, Policy: PolicyNone}
			l, dir := openTest(t, opts)
			fill(t, l, 1, 200, 5)
			if durable {
				if _, err := l.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			segs := l.Segments()
			act := segs[len(segs)-1]
			l.Abandon()
			path := filepath.Join(dir, segName(act.First))
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(encodeSegHeader(act.First-100, 4<<10), 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
			l2, err := Open(dir, opts)
			var ce *CorruptError
			switch {
			case durable && !errors.As(err, &ce):
				t.Fatalf("open: %v; want a *CorruptError", err)
			case !durable && err != nil:
				t.Fatalf("open: %v; want the half-made segment removed", err)
			case !durable:
				defer l2.Close()
				if _, last := l2.Bounds(); last != act.First-1 {
					t.Fatalf("last %d, want %d (the segment before)", last, act.First-1)
				}
			}
		})
	}
}

// TestMissingDurableTailIsCorruption: the last segment file of a log whose
// records were all durable is gone; the segment before it ends cleanly, so
// only the hint shows that records are missing: Open refuses, and with
// SkipCorrupt keeps them as a hole and numbers on after it.
func TestMissingDurableTailIsCorruption(t *testing.T) {
	opts := Options{SegmentSize: 4 << 10, Policy: PolicySync}
	l, dir := openTest(t, opts)
	fill(t, l, 1, 200, 5)
	segs := l.Segments()
	act := segs[len(segs)-1]
	if act.Last != 200 || act.First <= 1 {
		t.Fatalf("active segment %+v", act)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{segName(act.First), filepath.Base(idxPath(dir, act.First)), cleanName} {
		if err := os.Remove(filepath.Join(dir, p)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	l2 := refusedThenSkipped(t, dir, opts, func(ce *CorruptError) bool { return ce.Seq == act.First },
		fmt.Sprintf("a *CorruptError from seq %d", act.First))
	if _, last := l2.Bounds(); last != 200 {
		t.Fatalf("last %d, want 200 (the hole kept)", last)
	}
	if _, err := l2.Read(act.First); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read %d: %v; want ErrCorrupt", act.First, err)
	}
	if first, err := l2.Append([]Entry{entry(201)}); err != nil || first != 201 {
		t.Fatalf("append: %d, %v", first, err)
	}
}
