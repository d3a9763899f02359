package broker

import "sort"

// span is the half-open range [lo, hi) of settled sequence numbers.
type span struct{ lo, hi Seq }

// ackSet records which offsets of one group in one partition are settled
// (acked or dead-lettered). Everything below frontier is settled; above it,
// settled offsets are kept as sorted, disjoint, non-adjacent spans. Its size
// grows with the number of gaps (each gap holds at least one un-settled
// offset), never with the number of settled offsets, and no ack is ever
// dropped however far ahead of the frontier it lands.
//
// A sorted slice of spans was chosen over a bitset window: acks land mostly
// near the frontier, where merging touches the first spans only, and a far
// ack costs one span instead of a window that must slide or forget
// (BenchmarkAckSet measures the in-order, out-of-order and far cases).
type ackSet struct {
	frontier Seq // lowest offset that is not settled
	spans    []span
	above    uint64 // settled offsets above the frontier (sum of span lengths)
}

func newAckSet(frontier Seq) ackSet {
	if frontier == 0 {
		frontier = 1
	}
	return ackSet{frontier: frontier}
}

// contains reports whether seq is settled.
func (a *ackSet) contains(seq Seq) bool {
	if seq < a.frontier {
		return true
	}
	i := sort.Search(len(a.spans), func(i int) bool { return a.spans[i].hi > seq })
	return i < len(a.spans) && a.spans[i].lo <= seq
}

// add marks seq settled. It reports false if it already was.
func (a *ackSet) add(seq Seq) bool {
	if seq < a.frontier {
		return false
	}
	if seq == a.frontier {
		a.frontier++
		if len(a.spans) > 0 && a.spans[0].lo == a.frontier {
			a.above -= uint64(a.spans[0].hi - a.spans[0].lo)
			a.frontier = a.spans[0].hi
			a.spans = a.spans[:copy(a.spans, a.spans[1:])]
		}
		return true
	}
	// i is the first span ending after seq.
	i := sort.Search(len(a.spans), func(i int) bool { return a.spans[i].hi > seq })
	if i < len(a.spans) && a.spans[i].lo <= seq {
		return false
	}
	a.above++
	joinLeft := i > 0 && a.spans[i-1].hi == seq
	joinRight := i < len(a.spans) && a.spans[i].lo == seq+1
	switch {
	case joinLeft && joinRight:
		a.spans[i-1].hi = a.spans[i].hi
		a.spans = append(a.spans[:i], a.spans[i+1:]...)
	case joinLeft:
		a.spans[i-1].hi = seq + 1
	case joinRight:
		a.spans[i].lo = seq
	default:
		a.spans = append(a.spans, span{})
		copy(a.spans[i+1:], a.spans[i:])
		a.spans[i] = span{seq, seq + 1}
	}
	return true
}

// advanceTo marks everything below seq settled (messages removed by
// retention).
func (a *ackSet) advanceTo(seq Seq) {
	if seq <= a.frontier {
		return
	}
	a.frontier = seq
	i := 0
	for i < len(a.spans) && a.spans[i].lo <= a.frontier {
		if a.spans[i].hi > a.frontier {
			a.frontier = a.spans[i].hi
		}
		a.above -= uint64(a.spans[i].hi - a.spans[i].lo)
		i++
	}
	a.spans = a.spans[:copy(a.spans, a.spans[i:])]
}

// nextUnsettled returns the lowest offset >= seq that is not settled.
func (a *ackSet) nextUnsettled(seq Seq) Seq {
	if seq < a.frontier {
		return a.frontier
	}
	i := sort.Search(len(a.spans), func(i int) bool { return a.spans[i].hi > seq })
	if i < len(a.spans) && a.spans[i].lo <= seq {
		return a.spans[i].hi
	}
	return seq
}

// setSpans installs spans read from a snapshot.
func (a *ackSet) setSpans(spans []span) {
	a.spans = spans
	a.above = 0
	for _, sp := range spans {
		a.above += uint64(sp.hi - sp.lo)
	}
}
