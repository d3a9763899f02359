package broker

import (
	"math/rand/v2"
	"testing"
)

func TestAckSetTable(t *testing.T) {
	tests := []struct {
		name     string
		adds     []Seq
		frontier Seq
		spans    []span
	}{
		{"empty", nil, 1, nil},
		{"in order", []Seq{1, 2, 3}, 4, nil},
		{"gap", []Seq{1, 3}, 2, []span{{3, 4}}},
		{"fill gap", []Seq{1, 3, 2}, 4, nil},
		{"far ack kept", []Seq{1_000_000_000}, 1, []span{{1_000_000_000, 1_000_000_001}}},
		{"join both", []Seq{5, 7, 6}, 1, []span{{5, 8}}},
		{"join left", []Seq{5, 6}, 1, []span{{5, 7}}},
		{"join right", []Seq{6, 5}, 1, []span{{5, 7}}},
		{"duplicate", []Seq{3, 3, 1, 1}, 2, []span{{3, 4}}},
		{"frontier swallows span", []Seq{2, 3, 5, 1}, 4, []span{{5, 6}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAckSet(1)
			for _, s := range tt.adds {
				a.add(s)
			}
			if a.frontier != tt.frontier {
				t.Fatalf("frontier = %d, want %d", a.frontier, tt.frontier)
			}
			if len(a.spans) != len(tt.spans) {
				t.Fatalf("spans = %v, want %v", a.spans, tt.spans)
			}
			for i := range a.spans {
				if a.spans[i] != tt.spans[i] {
					t.Fatalf("spans = %v, want %v", a.spans, tt.spans)
				}
			}
		})
	}
}

// TestAckSetModel checks add/contains/advanceTo/nextUnsettled against a map.
func TestAckSetModel(t *testing.T) {
	seeds := uint64(20)
	if raceEnabled {
		seeds = 5 // pure computation: the race detector adds nothing here
	}
	for seed := uint64(0); seed < seeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		a := newAckSet(1)
		model := map[Seq]bool{}
		var floor Seq = 1
		for i := 0; i < 2000; i++ {
			s := Seq(r.IntN(300) + 1)
			switch r.IntN(10) {
			case 0:
				a.advanceTo(s)
				for ; floor < s; floor++ {
					model[floor] = true
				}
			default:
				was := model[s] || s < floor
				if got := a.add(s); got == was {
					t.Fatalf("seed %d: add(%d) = %v, already settled %v", seed, s, got, was)
				}
				model[s] = true
			}
			for q := Seq(1); q <= 310; q++ {
				if a.contains(q) != (model[q] || q < floor) {
					t.Fatalf("seed %d: contains(%d) = %v", seed, q, a.contains(q))
				}
			}
			q := Seq(r.IntN(310) + 1)
			want := q
			for model[want] || want < floor {
				want++
			}
			if got := a.nextUnsettled(q); got != want {
				t.Fatalf("seed %d: nextUnsettled(%d) = %d, want %d", seed, q, got, want)
			}
			var above uint64
			for q := a.frontier; q <= 310; q++ {
				if model[q] {
					above++
				}
			}
			if a.above != above {
				t.Fatalf("seed %d: above = %d, want %d", seed, a.above, above)
			}
			// invariants: spans sorted, disjoint, non-adjacent, above frontier
			prev := a.frontier
			for _, sp := range a.spans {
				if sp.lo <= prev || sp.hi <= sp.lo {
					t.Fatalf("seed %d: bad spans %v frontier %d", seed, a.spans, a.frontier)
				}
				prev = sp.hi
			}
		}
	}
}

func BenchmarkAckSet(b *testing.B) {
	b.Run("in-order", func(b *testing.B) {
		a := newAckSet(1)
		for i := 0; i < b.N; i++ {
			a.add(Seq(i + 1))
		}
	})
	b.Run("window-1024-shuffled", func(b *testing.B) {
		// acks arrive shuffled within windows of 1024 in-flight offsets
		a := newAckSet(1)
		r := rand.New(rand.NewPCG(1, 2))
		perm := r.Perm(1024)
		for i := 0; i < b.N; i++ {
			base := Seq(i/1024) * 1024
			a.add(base + Seq(perm[i%1024]) + 1)
		}
		b.ReportMetric(float64(cap(a.spans)), "spans-cap")
	})
	b.Run("far", func(b *testing.B) {
		a := newAckSet(1)
		for i := 0; i < b.N; i++ {
			a.add(Seq(2 + 2*i)) // every other offset: worst case, one span per ack
		}
		b.ReportMetric(float64(len(a.spans)), "spans")
	})
}
