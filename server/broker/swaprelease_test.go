package broker

import (
	"fmt"
	"testing"
)

// TestSwapGuard: a plain topic has nothing to guard; a compressed one
// watches for replacements swapWatchRounds rounds after its last append
// and while some are unreleased, releases each count once, and never past
// what a borrower noted.
func TestSwapGuard(t *testing.T) {
	var plain swapGuard
	plain.beginRound()
	plain.watchAfter(true)
	if plain.watching() {
		t.Fatal("a plain topic's guard wakes the actor")
	}

	sc := &swapCounter{count: 2}
	g := swapGuard{log: sc}
	g.beginRound()
	if g.round != 2 {
		t.Fatalf("round = %d, want the log's count 2", g.round)
	}
	if !g.watching() {
		t.Fatal("two unreleased replacements, not watching")
	}
	g.release(1, true) // a borrower read before the second
	g.release(1, true)
	g.release(5, true) // a borrower noted more than the log has
	if fmt.Sprint(sc.released) != "[1 2]" {
		t.Fatalf("released %v, want [1 2]", sc.released)
	}
	if g.watching() {
		t.Fatal("everything released and no append: still watching")
	}
	g.watchAfter(true)
	for i := 0; i < swapWatchRounds; i++ {
		if !g.watching() {
			t.Fatalf("stopped watching %d rounds after an append, want %d", i, swapWatchRounds)
		}
		g.watchAfter(false)
	}
	if g.watching() {
		t.Fatalf("still watching %d idle rounds after an append", swapWatchRounds)
	}
	sc.count = 3
	g.release(0, false)
	if fmt.Sprint(sc.released) != "[1 2 3]" {
		t.Fatalf("released %v, want [1 2 3]", sc.released)
	}
}
