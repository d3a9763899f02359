package broker

import (
	"sync/atomic"
)

// cmdQueue is a bounded multi-producer, single-consumer queue of commands
// feeding one partition actor. push never blocks: it reports false when the
// queue is full. drain is called by the consumer only and never blocks.
//
// Two implementations exist so they can be benchmarked in the same run
// (BenchmarkQueue): ring, a lock-free array ring (the one in use, it won), and
// chanQueue, a buffered channel.
type cmdQueue interface {
	push(c *command) bool
	drain(dst []command, max int) []command
	empty() bool
}

// ringSlot is one cell of the ring. seq tells producers and the consumer whose
// turn it is (Vyukov's bounded queue): seq == pos means free for the producer
// that claims pos; seq == pos+1 means filled and ready for the consumer.
type ringSlot struct {
	seq atomic.Uint64
	c   command
}

// ringChunk is the unit in which a ring's slots are allocated. A slot costs
// about 200 bytes, so a whole 8,192-slot ring would cost 1.6 MiB for every
// partition, idle or not (10,000 one-message topics took 16 GiB); chunks are
// allocated when a producer first reaches them, so an idle partition holds
// one chunk and a busy one grows to the full ring once, never shrinking.
const ringChunk = 16

type ringChunkSlots [ringChunk]ringSlot

// ring is a lock-free bounded MPSC queue. Producers claim a position with one
// CAS on tail, fill the slot and publish it by storing its seq; the single
// consumer reads slots in order without atomics on head. Slots live in
// chunks allocated on first use (newChunk); a chunk's seqs start at the
// positions of the ring's first lap, so a chunk is always allocated before
// any position of a later lap can reach it.
type ring struct {
	mask   uint64
	chunks []atomic.Pointer[ringChunkSlots]
	_      [56]byte // keep tail off the chunks header's cache line
	tail   atomic.Uint64
	_      [56]byte // keep head off tail's cache line
	head   uint64
}

func newRing(size int) *ring {
	n := 1
	for n < size {
		n <<= 1
	}
	nchunks := (n + ringChunk - 1) / ringChunk
	r := &ring{mask: uint64(n - 1), chunks: make([]atomic.Pointer[ringChunkSlots], nchunks)}
	r.chunk(0) // the first chunk at once: every partition pushes something
	return r
}

// chunk returns chunk i, allocating it if no one has yet. Racing producers
// may both allocate; one CAS wins and the other's chunk is dropped.
func (r *ring) chunk(i uint64) *ringChunkSlots {
	if c := r.chunks[i].Load(); c != nil {
		return c
	}
	c := new(ringChunkSlots)
	base := i * ringChunk
	for j := range c {
		c[j].seq.Store(base + uint64(j))
	}
	if r.chunks[i].CompareAndSwap(nil, c) {
		return c
	}
	return r.chunks[i].Load()
}

// slot is the cell of position pos; nil when its chunk was never allocated
// (nothing was ever pushed there: for the consumer, empty).
func (r *ring) slot(pos uint64, alloc bool) *ringSlot {
	idx := pos & r.mask
	ci := idx / ringChunk
	c := r.chunks[ci].Load()
	if c == nil {
		if !alloc {
			return nil
		}
		c = r.chunk(ci)
	}
	return &c[idx%ringChunk]
}

func (r *ring) push(c *command) bool {
	for {
		pos := r.tail.Load()
		s := r.slot(pos, true)
		seq := s.seq.Load()
		switch {
		case seq == pos:
			if r.tail.CompareAndSwap(pos, pos+1) {
				s.c = *c
				s.seq.Store(pos + 1)
				return true
			}
		case seq < pos:
			// The slot still holds the entry from one lap ago: full.
			return false
		}
		// Another producer claimed pos first; retry with the new tail.
	}
}

func (r *ring) drain(dst []command, max int) []command {
	for n := 0; n < max; n++ {
		s := r.slot(r.head, false)
		if s == nil || s.seq.Load() != r.head+1 {
			break // empty, or the producer of this slot has not finished
		}
		dst = append(dst, s.c)
		s.c = command{} // drop references for the GC
		s.seq.Store(r.head + r.mask + 1)
		r.head++
	}
	return dst
}

func (r *ring) empty() bool {
	s := r.slot(r.head, false)
	return s == nil || s.seq.Load() != r.head+1
}

// chanQueue is the buffered-channel alternative, kept for the benchmark.
type chanQueue struct {
	ch chan command
}

func newChanQueue(size int) *chanQueue { return &chanQueue{ch: make(chan command, size)} }

func (q *chanQueue) push(c *command) bool {
	select {
	case q.ch <- *c:
		return true
	default:
		return false
	}
}

func (q *chanQueue) drain(dst []command, max int) []command {
	for n := 0; n < max; n++ {
		select {
		case c := <-q.ch:
			dst = append(dst, c)
		default:
			return dst
		}
	}
	return dst
}

func (q *chanQueue) empty() bool { return len(q.ch) == 0 }

// ctlStack is an unbounded lock-free MPSC stack of control closures (catalog
// changes, cross-partition completions, owner release). They are rare and must
// never be refused, unlike ring commands.
type ctlStack struct {
	head atomic.Pointer[ctlNode]
}

type ctlNode struct {
	fn   func(p *partition)
	next *ctlNode
}

func (s *ctlStack) push(fn func(p *partition)) {
	n := &ctlNode{fn: fn}
	for {
		old := s.head.Load()
		n.next = old
		if s.head.CompareAndSwap(old, n) {
			return
		}
	}
}

// takeAll returns every pushed closure, oldest first.
func (s *ctlStack) takeAll(dst []func(p *partition)) []func(p *partition) {
	n := s.head.Swap(nil)
	start := len(dst)
	for ; n != nil; n = n.next {
		dst = append(dst, n.fn)
	}
	for i, j := start, len(dst)-1; i < j; i, j = i+1, j-1 {
		dst[i], dst[j] = dst[j], dst[i]
	}
	return dst
}

func (s *ctlStack) empty() bool { return s.head.Load() == nil }

// waker parks and wakes a consumer without a lost wake-up: the consumer sets
// sleeping, re-checks its queues and only then blocks on ch; a producer that
// has published an item and sees sleeping sends one token. Both sides use
// sequentially consistent atomics, so either the producer sees sleeping or the
// consumer sees the item.
type waker struct {
	sleeping atomic.Bool
	ch       chan struct{}
}

func newWaker() *waker { return &waker{ch: make(chan struct{}, 1)} }

func (w *waker) wake() {
	if w.sleeping.Load() && w.sleeping.CompareAndSwap(true, false) {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

// kick always leaves a token, for wake-ups not tied to a queue item (timers).
func (w *waker) kick() {
	w.sleeping.Store(false)
	select {
	case w.ch <- struct{}{}:
	default:
	}
}
