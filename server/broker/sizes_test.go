package broker

import (
	"math/rand/v2"
	"testing"
)

// The ledger against per-message sums, across trims.
func TestSizeLedger(t *testing.T) {
	for _, start := range []Seq{1, 7, 64, 65, 1000} {
		rng := rand.New(rand.NewPCG(uint64(start), 9))
		var l sizeLedger
		sizes := map[Seq]int64{}
		last := start + Seq(rng.IntN(500)+1)
		for s := start; s <= last; s++ {
			n := int64(rng.IntN(2000))
			sizes[s] = n
			l.add(s, n)
		}
		first := start
		exact := func(a Seq) int64 {
			var sum int64
			for s := max(a, first); s <= last; s++ {
				sum += sizes[s]
			}
			return sum
		}
		for round := 0; round < 3; round++ {
			for a := first; a <= last+1; a++ {
				got, want := l.from(a), exact(a)
				if got != want {
					t.Fatalf("start %d first %d: from(%d) = %d, want %d", start, first, a, got, want)
				}
				if c := l.cutFor(first, want); l.from(c) > want || (c > first && l.from(c-1) <= want) {
					t.Fatalf("cutFor(%d) = %d: from = %d", want, c, l.from(c))
				}
			}
			// trim at a chunk boundary, as retention of whole segments does
			first = min(first+Seq(rng.IntN(200)), last)
			first -= (first - 1) % ledgerChunk
			first = max(first, start)
			l.trim(first)
		}
	}
	var l sizeLedger
	l.addRun(3, 200, 10)
	l.add(201, 5)
	if got := l.from(65); got != 136*10+5 {
		t.Fatalf("addRun: from(65) = %d", got)
	}
	if got := l.from(3); got != 198*10+5 {
		t.Fatalf("addRun: from(3) = %d", got)
	}
}
