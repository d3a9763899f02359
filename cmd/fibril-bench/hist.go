package main

import (
	"math/bits"
	"sync"
	"time"
)

// Histogram is a log-linear latency histogram: values (nanoseconds) fall in
// buckets of 1/64 of their power of two, so a percentile is exact to within
// about 1.6 %. It is safe for concurrent use.
type Histogram struct {
	mu     sync.Mutex
	counts [64 * 64]uint64
	n      uint64
	max    int64
}

const subBits = 6 // 64 sub-buckets per power of two

func bucketOf(v int64) int {
	if v < 1<<subBits {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - subBits // >= 1
	return e<<subBits | int(uint64(v)>>(e-1))&(1<<subBits-1)
}

// lowOf is the smallest value of bucket i.
func lowOf(i int) int64 {
	if i < 1<<subBits {
		return int64(i)
	}
	e := i >> subBits
	return int64(1<<subBits|i&(1<<subBits-1)) << (e - 1)
}

// Add records one value; negative values (clock steps) count as 0.
func (h *Histogram) Add(v int64) {
	if v < 0 {
		v = 0
	}
	h.mu.Lock()
	h.counts[bucketOf(v)]++
	h.n++
	if v > h.max {
		h.max = v
	}
	h.mu.Unlock()
}

// Merge adds o's values to h.
func (h *Histogram) Merge(o *Histogram) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Count returns the number of values recorded.
func (h *Histogram) Count() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Quantile returns the value at quantile q in [0,1] (the low edge of its
// bucket; the maximum for q = 1), 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return 0
	}
	if q >= 1 {
		return time.Duration(h.max)
	}
	rank := uint64(q*float64(h.n-1)) + 1
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(lowOf(i), h.max))
		}
	}
	return time.Duration(h.max)
}
