package broker

import "testing"

// TestExtent: appends count toward the sizes, the average and the
// published counter, samples only toward the average, and the purge
// floor only rises and hides the offsets below it from readers.
func TestExtent(t *testing.T) {
	x := extent{first: 1}
	if x.avgSize() != 0 {
		t.Fatal("an empty extent has an average size")
	}
	x.sampled(30)
	for seq := Seq(1); seq <= 3; seq++ {
		x.appended(seq, 10*int64(seq))
	}
	x.last = 3
	if x.published != 3 || x.totalMsgs != 4 || x.avgSize() != (30+10+20+30)/4 {
		t.Fatalf("published %d, counted %d, average %d", x.published, x.totalMsgs, x.avgSize())
	}
	if got := x.sizes.from(2); got != 50 {
		t.Fatalf("bytes from 2: %d, want 50", got)
	}
	if x.readFrom() != 1 {
		t.Fatalf("readFrom %d before a purge", x.readFrom())
	}
	if !x.purgeTo(3) || x.purgeTo(2) || x.purgeTo(3) {
		t.Fatal("the purge floor does not only rise")
	}
	if x.readFrom() != 3 {
		t.Fatalf("readFrom %d after purging to 3", x.readFrom())
	}
}
