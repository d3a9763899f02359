package stagetime

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Bucket layout: bucket 0 holds values up to minBound (1.024 µs); above
// it each octave [2^e, 2^(e+1)) ns is split into subBuckets equal parts,
// up to the octave that starts at 2^maxExp ns (about 17 s); larger values
// fall in the last bucket.
const (
	minExp     = 10 // 2^10 ns = 1.024 µs
	maxExp     = 34 // 2^34 ns = 17.2 s
	subBits    = 2
	subBuckets = 1 << subBits
	// NumBuckets is the number of buckets of a Hist.
	NumBuckets = 1 + (maxExp-minExp+1)*subBuckets
)

// Hist is a histogram of durations whose Observe is a few atomic adds:
// safe for concurrent use, no locks, no allocation. The zero value is
// empty.
type Hist struct {
	counts [NumBuckets]atomic.Uint64
	sum    atomic.Uint64 // nanoseconds
}

// bucket returns the bucket of a duration of ns nanoseconds.
func bucket(ns uint64) int {
	if ns <= 1<<minExp {
		return 0
	}
	e := bits.Len64(ns-1) - 1 // ns-1 so that a bound falls in the bucket it closes
	if e > maxExp {
		return NumBuckets - 1
	}
	sub := int((ns-1)>>(e-subBits)) & (subBuckets - 1)
	return 1 + (e-minExp)*subBuckets + sub
}

// UpperBound returns the largest duration bucket i holds (the last
// bucket's is its nominal bound; larger values are counted there too).
func UpperBound(i int) time.Duration {
	if i <= 0 {
		return 1 << minExp
	}
	e := (i-1)/subBuckets + minExp
	sub := (i - 1) % subBuckets
	return time.Duration(uint64(1)<<e + uint64(sub+1)<<(e-subBits))
}

// Observe adds one duration (a negative one counts as 0).
func (h *Hist) Observe(d time.Duration) {
	ns := uint64(max(d, 0))
	h.counts[bucket(ns)].Add(1)
	h.sum.Add(ns)
}

// Snapshot is a copy of a Hist at one moment (the buckets are read one by
// one, so a snapshot taken during observations may be off by those).
type Snapshot struct {
	Counts [NumBuckets]uint64
	Count  uint64
	Sum    time.Duration
}

// Snapshot copies h.
func (h *Hist) Snapshot() Snapshot {
	var s Snapshot
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
		s.Count += s.Counts[i]
	}
	s.Sum = time.Duration(h.sum.Load())
	return s
}

// Mean is the mean duration (0 when empty).
func (s Snapshot) Mean() time.Duration {
	if s.Count == 0 {
		return 0
	}
	return s.Sum / time.Duration(s.Count)
}

// Quantile returns the upper bound of the bucket holding the q-quantile
// (0 <= q <= 1); 0 when empty.
func (s *Snapshot) Quantile(q float64) time.Duration {
	if s.Count == 0 {
		return 0
	}
	rank := uint64(q*float64(s.Count) + 0.5)
	rank = min(max(rank, 1), s.Count)
	var seen uint64
	for i, n := range s.Counts {
		seen += n
		if seen >= rank {
			return UpperBound(i)
		}
	}
	return UpperBound(NumBuckets - 1)
}
