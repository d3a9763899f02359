package seglog

import "testing"

// TestSegList: finding the segment for a sequence number, the active and
// the sealed ones, and a swap in place.
func TestSegList(t *testing.T) {
	a, b, c := &segment{first: 1}, &segment{first: 10}, &segment{first: 20}
	ss := segList{a, b, c}
	for _, tc := range []struct {
		seq  Seq
		want int
	}{{0, -1}, {1, 0}, {9, 0}, {10, 1}, {19, 1}, {20, 2}, {1000, 2}} {
		if got := ss.find(tc.seq); got != tc.want {
			t.Fatalf("find(%d) = %d, want %d", tc.seq, got, tc.want)
		}
	}
	if ss.active() != c || len(ss.sealed()) != 2 || segList(nil).active() != nil || len(segList(nil).sealed()) != 0 {
		t.Fatal("active or sealed wrong")
	}
	if !ss.holdsSealed(a) || !ss.holdsSealed(b) || ss.holdsSealed(c) || ss.holdsSealed(&segment{first: 10}) {
		t.Fatal("holdsSealed: want a and b only, never the active one or a stranger with the same first")
	}
	nb := &segment{first: 10, codec: CompressionS2}
	ss.replace(b, nb)
	if ss[1] != nb || ss.holdsSealed(b) || !ss.holdsSealed(nb) {
		t.Fatal("replace did not swap b for its compressed form")
	}
}
