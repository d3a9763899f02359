package seglog

import (
	"errors"
	"sync/atomic"
	"testing"
)

// TestDirSyncerFoldsRequests: asks made while a directory sync runs are
// folded into one more sync, and the first failure is kept until taken.
func TestDirSyncerFoldsRequests(t *testing.T) {
	var r releaser
	var calls atomic.Int32
	release := make(chan struct{})
	fail := errors.New("EIO")
	sync := func() error {
		if calls.Add(1) == 1 {
			<-release // the first sync runs until the test lets it go
			return fail
		}
		return nil
	}
	r.syncDirLater(sync)
	waitFor(t, "the first sync to start", func() bool { return calls.Load() == 1 })
	for range 3 {
		r.syncDirLater(sync) // folded into one more
	}
	close(release)
	r.wait()
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d syncs for one running and three asked meanwhile, want 2", n)
	}
	if err := r.takeDirErr(); !errors.Is(err, fail) {
		t.Fatalf("takeDirErr = %v, want the first sync's failure", err)
	}
	if err := r.takeDirErr(); err != nil {
		t.Fatalf("taken twice: %v", err)
	}
	r.syncDirLater(sync) // none runs: a new goroutine
	r.wait()
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d syncs, want 3", n)
	}
}

// TestGraveyardTake: what may go when, for truncated segments and for
// replaced ones with and without HoldSwapped.
func TestGraveyardTake(t *testing.T) {
	for _, hold := range []bool{false, true} {
		g := graveyard{hold: hold}
		cut := &segment{first: 1, afterlife: afterlife{trash: "1.trash.tmp"}}
		g.bury(cut)
		r1, r2 := &segment{first: 10}, &segment{first: 20}
		if g.buryReplaced(r1, g.swap()) || g.buryReplaced(r2, g.swap()) {
			t.Fatalf("hold %v: a replacement passed before any ReleaseSwapped", hold)
		}
		if tr := g.trash(); len(tr) != 1 || tr[0] != cut.trash {
			t.Fatalf("hold %v: trash %v, want only the truncated segment's", hold, tr)
		}
		if dead := g.take(false); len(dead) != 0 {
			t.Fatalf("hold %v: take(false) freed %d with nothing passed", hold, len(dead))
		}
		if !g.pass(1) || g.pass(1) {
			t.Fatalf("hold %v: pass(1) not news once and only once", hold)
		}
		if dead := g.take(false); len(dead) != 1 || dead[0] != r1 {
			t.Fatalf("hold %v: take(false) after pass(1) = %v, want the first replaced", hold, dead)
		}
		dead := g.take(true)
		want := 2 // a TruncateFront frees the truncated and, unless held, the replaced
		if hold {
			want = 1
		}
		if len(dead) != want || dead[0] != cut {
			t.Fatalf("hold %v: take(true) freed %d, want %d starting with the truncated one", hold, len(dead), want)
		}
		if hold {
			// ReleaseSwapped(2) ran while replacement 2's file was moved.
			g.pass(2)
			if !g.buryReplaced(&segment{first: 30}, 2) {
				t.Fatal("a replacement ReleaseSwapped passed not reported so")
			}
			if dead := g.take(false); len(dead) != 2 {
				t.Fatalf("take(false) after pass(2) freed %d, want both held replacements", len(dead))
			}
		}
		if g.swaps != 2 {
			t.Fatalf("hold %v: %d swaps counted, want 2", hold, g.swaps)
		}
	}
}

// TestCursorSetMove: a reader moving on in a segment drops whole chunks
// behind it (keeping the one before it); one that moves to a later segment
// leaves the old one to be dropped unless another reader is in it.
func TestCursorSetMove(t *testing.T) {
	var c cursorSet
	a, b := &segment{first: 1}, &segment{first: 100}
	steps := []struct {
		s        *segment
		off      int64
		from, to int64
		left     *segment
		what     string
	}{
		{a, 0, 0, 0, nil, "a new reader at the start"},
		{a, dropChunk + 10, 0, 0, nil, "in the second chunk: the first is kept"},
		{a, 3*dropChunk + 10, 0, 2 * dropChunk, nil, "in the fourth chunk: the first two go"},
		{a, 3*dropChunk + 20, 0, 0, nil, "in the same chunk: nothing more"},
		{a, 0, 0, 0, nil, "a second reader behind the first: a cursor of its own"},
		{b, 0, 0, 0, nil, "a reader moves on to b: another is still in a"},
		{b, 10, 0, 0, nil, "b again"},
	}
	for i, st := range steps {
		from, to, left := c.move(st.s, st.off)
		if from != st.from || to != st.to || left != st.left {
			t.Fatalf("step %d (%s): [%d, %d) left %v, want [%d, %d) left %v", i, st.what, from, to, left, st.from, st.to, st.left)
		}
	}
	// Both readers of a now read b: the second move out of a leaves it.
	var c2 cursorSet
	c2.move(a, 0)
	if _, _, left := c2.move(b, 0); left != a {
		t.Fatalf("the only reader of a moved to b: left %v, want a", left)
	}
	// Five readers in five segments: the least recently used cursor goes.
	var c3 cursorSet
	segs := make([]*segment, maxCursors+1)
	for i := range segs {
		segs[i] = &segment{first: Seq(1000 - 100*i)} // each behind the last: a new cursor
		c3.move(segs[i], 0)
	}
	for _, r := range c3.cs {
		if r.seg == segs[0] {
			t.Fatal("the least recently used cursor was kept")
		}
	}
}
