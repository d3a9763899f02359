package broker

import (
	"math/bits"
	"sync"
)

// Message bodies.
//
// A publish copies its header block and payload once, on the publisher's
// goroutine (prepare), into a buffer the command owns until the actor has
// appended it to the data log; after that the bytes live in the log and
// the buffer is garbage. At 100k messages of 1 KiB a second those copies
// were most of the bytes the server allocated, and what set how often the
// garbage collector ran: on two cores its marking takes CPU from the
// event loop and the actor, and its cycles showed in the latency tail.
// So the buffers are recycled, in size classes of powers of two, through
// sync.Pools owned by the broker (no package state).

const (
	bodyMinShift = 9  // smallest class: 512 bytes
	bodyMaxShift = 16 // largest pooled class: 64 KiB; larger bodies are not pooled
	bodyClasses  = bodyMaxShift - bodyMinShift + 1
)

// bodyBuf is a pooled body buffer. Pools hold pointers, so that putting
// one back allocates nothing.
type bodyBuf struct {
	b []byte // len 0, cap the class size
}

// bodyPool recycles body buffers between publishers and the actors.
type bodyPool struct {
	classes [bodyClasses]sync.Pool
}

// bodyClass returns the class holding n bytes, or -1 when n is over the
// largest class.
func bodyClass(n int) int {
	if n <= 1<<bodyMinShift {
		return 0
	}
	c := bits.Len(uint(n-1)) - bodyMinShift
	if c >= bodyClasses {
		return -1
	}
	return c
}

// get returns a buffer with room for n bytes (len 0), and the pooled
// buffer to give back with put (nil when n is too big to pool).
func (p *bodyPool) get(n int) ([]byte, *bodyBuf) {
	c := bodyClass(n)
	if c < 0 {
		return make([]byte, 0, n), nil
	}
	if v := p.classes[c].Get(); v != nil {
		bb := v.(*bodyBuf)
		return bb.b[:0], bb
	}
	bb := &bodyBuf{b: make([]byte, 0, 1<<(c+bodyMinShift))}
	return bb.b, bb
}

// put gives bb back. The caller must hold no reference to its bytes.
func (p *bodyPool) put(bb *bodyBuf) {
	if bb == nil {
		return
	}
	c := bodyClass(cap(bb.b))
	if c < 0 || cap(bb.b) != 1<<(c+bodyMinShift) {
		return // not one of ours
	}
	bb.b = bb.b[:0]
	p.classes[c].Put(bb)
}
