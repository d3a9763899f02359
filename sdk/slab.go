package fibril

// The delivery slab: the read loop copies every delivery out of its read
// buffer exactly once, into blocks it carves up, and takes Msg values from
// arrays of slabMsgs, so a delivery costs no allocation of its own (about
// one per 10 deliveries of 1 KiB: a block per 29, a Msg array per 16). The
// price is retention: a block stays alive while any delivery cut from it is
// reachable, and an array of Msg values while any of them is (see Msg).
//
// A block is just under 32 KiB, the largest allocation the runtime serves
// from its per-P caches (maxSmallSize less an 8-byte header allowance, as
// of Go 1.22): anything larger is a large object, taken from the heap under
// its lock, often on pages just returned to the OS (a page fault each),
// which took about 4 % of a W1 client's CPU at 64 KiB.

const (
	slabBlock = 32<<10 - 8 // bytes per block: a small allocation
	slabMax   = 8 << 10    // larger deliveries get an allocation of their own
	slabMsgs  = 16         // Msg values per array (a kept Msg keeps its neighbours' data too)
)

// slab hands out pieces of larger allocations. It is owned by one read
// loop; the pieces it returns never overlap, so they may be handed to other
// goroutines.
type slab struct {
	buf  []byte
	msgs []Msg
}

// bytes returns n bytes whose capacity is n (an append reallocates).
func (s *slab) bytes(n int) []byte {
	if n > slabMax {
		return make([]byte, n)
	}
	if len(s.buf) < n {
		s.buf = make([]byte, slabBlock)
	}
	b := s.buf[:n:n]
	s.buf = s.buf[n:]
	return b
}

// msg returns a zero Msg.
func (s *slab) msg() *Msg {
	if len(s.msgs) == 0 {
		s.msgs = make([]Msg, slabMsgs)
	}
	m := &s.msgs[0]
	s.msgs = s.msgs[1:]
	return m
}
