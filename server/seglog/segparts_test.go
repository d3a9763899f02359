package seglog

import "testing"

// TestSparseIndex: an entry per interval (or forced), and a walk to a
// record starts at the last entry at or below it.
func TestSparseIndex(t *testing.T) {
	x := noIndex()
	for _, c := range []struct {
		seq   Seq
		off   int64
		force bool
	}{{1, 32, false}, {2, 100, false}, {3, 200, false}, {4, 260, true}, {5, 410, false}} {
		x.addIndex(c.seq, c.off, 150, c.force)
	}
	want := []indexEntry{{1, 32}, {3, 200}, {4, 260}, {5, 410}}
	if len(x.index) != len(want) {
		t.Fatalf("index %v, want %v", x.index, want)
	}
	for i := range want {
		if x.index[i] != want[i] {
			t.Fatalf("index %v, want %v", x.index, want)
		}
	}
	for _, c := range []struct {
		seq  Seq
		from int64
	}{{1, 32}, {2, 32}, {3, 200}, {4, 260}, {9, 410}} {
		if got := x.walkFrom(c.seq); got != c.from {
			t.Fatalf("walkFrom(%d) = %d, want %d", c.seq, got, c.from)
		}
	}
	empty := noIndex()
	if got := empty.walkFrom(5); got != segHeaderSize {
		t.Fatalf("walkFrom with no index = %d, want the first record at %d", got, segHeaderSize)
	}
	y := noIndex()
	y.loadIndex(nil)
	if y.lastIndexed != -1 {
		t.Fatal("an empty loaded index claims an entry")
	}
	y.loadIndex(want[:2])
	if y.lastIndexed != 200 {
		t.Fatalf("lastIndexed %d after loading, want 200", y.lastIndexed)
	}
}

// TestDamage: a skipped range with records becomes a hole; one with none
// (From > To) is listed but holds nothing; skippedAt finds ranges with bytes.
func TestDamage(t *testing.T) {
	var d damage
	d.skip(SkippedRange{Offset: 64, Length: 40, From: 5, To: 7})
	d.skip(SkippedRange{Offset: 200, Length: 0, From: 9, To: 8})
	for seq, want := range map[Seq]bool{4: false, 5: true, 7: true, 8: false, 9: false} {
		if got := d.inHole(seq); got != want {
			t.Fatalf("inHole(%d) = %v, want %v", seq, got, want)
		}
	}
	if r, ok := d.skippedAt(64); !ok || r.Length != 40 {
		t.Fatalf("skippedAt(64) = %+v, %v", r, ok)
	}
	if _, ok := d.skippedAt(200); ok {
		t.Fatal("skippedAt found a range of no bytes")
	}
	if len(d.skipped) != 2 || len(d.holes) != 1 {
		t.Fatalf("%d skipped, %d holes; want 2 and 1", len(d.skipped), len(d.holes))
	}
}
