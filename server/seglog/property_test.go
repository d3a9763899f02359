package seglog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPropertyAgainstModel runs random interleavings of append, read, scan,
// truncate-front and reopen (clean or after a process crash) and compares
// the log with a simple in-memory model after every step.
func TestPropertyAgainstModel(t *testing.T) {
	runSeeds(t, "", seedCount(t, 16), func(t *testing.T, seed int) {
		rng := rand.New(rand.NewPCG(uint64(seed), 5))
		opts := Options{SegmentSize: 4 << 10 << rng.IntN(2), IndexInterval: 32 << rng.IntN(5), Policy: Policy(rng.IntN(3))}
		dir := t.TempDir()
		l, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { l.Close() }()
		model := map[Seq]Entry{}
		var last, trunc, first Seq = 0, 1, 1
		for step := 0; step < 200; step++ {
			switch op := rng.IntN(20); {
			case op < 9: // append
				batch := randomBatch(rng, fmt.Sprintf("s%d", step), 8)
				got, err := l.Append(batch)
				if err != nil || got != last+1 {
					t.Fatalf("step %d: append = %d, %v; want %d", step, got, err, last+1)
				}
				for i, e := range batch {
					model[got+Seq(i)] = e
				}
				last += Seq(len(batch))
			case op < 13: // read
				seq := Seq(rng.Int64N(int64(last) + 3))
				r, err := l.Read(seq)
				if seq < first || seq > last || seq == 0 {
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("step %d: read %d outside [%d,%d]: %v", step, seq, first, last, err)
					}
				} else if err != nil || !sameEntry(r, model[seq]) || r.Seq != seq {
					t.Fatalf("step %d: read %d: %v", step, seq, err)
				}
			case op < 15: // scan
				from := Seq(rng.Int64N(int64(last) + 2))
				maxBytes := rng.IntN(2000) - 200
				want := max(from, first)
				bytesSeen := 0
				err := l.Scan(from, maxBytes, func(r Record) bool {
					if r.Seq != want || !sameEntry(r, model[r.Seq]) {
						t.Fatalf("step %d: scan from %d gave %d, want %d", step, from, r.Seq, want)
					}
					bytesSeen += len(r.Data)
					want++
					return true
				})
				if err != nil {
					t.Fatal(err)
				}
				// It stopped at the end or because the next record would exceed maxBytes.
				if want <= last && (want == max(from, first) || maxBytes <= 0 || bytesSeen+len(model[want].Data) <= maxBytes) {
					t.Fatalf("step %d: scan from %d (max %d) stopped early at %d of %d", step, from, maxBytes, want, last)
				}
			case op < 17: // truncate front
				to := Seq(rng.Int64N(int64(last) + 5))
				if err := l.TruncateFront(to); err != nil {
					t.Fatal(err)
				}
				trunc = max(trunc, to)
				f, _ := l.Bounds()
				if f < first || f > max(trunc, first) {
					t.Fatalf("step %d: TruncateFront(%d): first %d (was %d)", step, to, f, first)
				}
				first = f
			default: // reopen, cleanly or after a crash of the process
				if rng.IntN(2) == 0 {
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
				} else {
					l.Abandon()
				}
				if l, err = Open(dir, opts); err != nil {
					t.Fatalf("step %d: reopen: %v", step, err)
				}
			}
			f, lst := l.Bounds()
			if f != first || lst != last {
				t.Fatalf("step %d: bounds %d,%d; model %d,%d", step, f, lst, first, last)
			}
		}
	})
}
