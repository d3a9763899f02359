package seglog

import (
	"errors"
	"testing"
)

// TestDurabilityPoints: the durable point and the side mark only rise, and
// covers compares both with what was written.
func TestDurabilityPoints(t *testing.T) {
	var d durability
	steps := []struct {
		raise    Seq
		side     uint64
		rose     bool
		want     Seq
		wantSide uint64
	}{
		{raise: 5, side: 0, rose: true, want: 5},
		{raise: 3, side: 2, rose: false, want: 5, wantSide: 2},
		{raise: 5, side: 1, rose: false, want: 5, wantSide: 2},
		{raise: 9, side: 4, rose: true, want: 9, wantSide: 4},
	}
	for i, s := range steps {
		if got := d.raise(s.raise); got != s.rose {
			t.Fatalf("step %d: raise(%d) rose = %v, want %v", i, s.raise, got, s.rose)
		}
		d.raiseSide(s.side)
		if d.durable() != s.want || d.sideDurable() != s.wantSide {
			t.Fatalf("step %d: durable %d side %d, want %d and %d", i, d.durable(), d.sideDurable(), s.want, s.wantSide)
		}
	}
	if d.addSide() != 1 || d.addSide() != 2 || d.sideWritten() != 2 {
		t.Fatalf("side marks not counted 1, 2: written %d", d.sideWritten())
	}
	for _, c := range []struct {
		last Seq
		side uint64
		want bool
	}{{9, 4, true}, {8, 0, true}, {10, 4, false}, {9, 5, false}} {
		if got := d.covers(c.last, c.side); got != c.want {
			t.Fatalf("covers(%d, %d) = %v at durable 9, side 4; want %v", c.last, c.side, got, c.want)
		}
	}
}

// TestDurabilityFailIsSticky: the first failed fsync is the error every
// later caller gets, wrapping ErrSyncFailed and the cause.
func TestDurabilityFailIsSticky(t *testing.T) {
	var d durability
	if d.err() != nil {
		t.Fatal("a new log reports a failed fsync")
	}
	first := errors.New("EIO")
	got := d.fail(first)
	if !errors.Is(got, ErrSyncFailed) || !errors.Is(got, first) {
		t.Fatalf("fail = %v, want ErrSyncFailed wrapping the cause", got)
	}
	if again := d.fail(errors.New("later")); again != got || d.err() != got {
		t.Fatalf("a second failure replaced the first: %v, %v", again, d.err())
	}
}
