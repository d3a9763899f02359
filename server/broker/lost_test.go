package broker

import (
	"testing"

	"github.com/fibrilmq/fibril/server/seglog"
)

func TestHoleSetFind(t *testing.T) {
	var h holeSet
	h.add(seglog.SkippedRange{From: 10, To: 12, Path: "a"})
	h.add(seglog.SkippedRange{From: 20, To: 20, Path: "b"})
	for _, c := range []struct {
		seq  Seq
		ok   bool
		path string
	}{
		{9, false, ""}, {10, true, "a"}, {12, true, "a"}, {13, false, ""},
		{19, false, ""}, {20, true, "b"}, {21, false, ""},
	} {
		r, ok := h.find(c.seq)
		if ok != c.ok || r.Path != c.path {
			t.Errorf("find(%d) = %q, %v; want %q, %v", c.seq, r.Path, ok, c.path, c.ok)
		}
	}
}

func TestHoleSetLogsEachLossOnce(t *testing.T) {
	var h holeSet
	a, b := seglog.SkippedRange{From: 10, To: 12}, seglog.SkippedRange{From: 20, To: 20}
	if !h.firstLoss(1, a) || h.firstLoss(1, a) {
		t.Fatal("group 1's loss of a not logged exactly once")
	}
	if !h.firstLoss(2, a) || !h.firstLoss(1, b) {
		t.Fatal("another group or another hole is another loss")
	}
	for g := GroupID(3); len(h.logged) < maxLoggedHoles; g++ {
		h.firstLoss(g, a)
	}
	if h.firstLoss(GroupID(1<<30), a) {
		t.Fatal("logged past the bound")
	}
	if len(h.logged) != maxLoggedHoles {
		t.Fatalf("remembers %d losses, bound %d", len(h.logged), maxLoggedHoles)
	}
}
