package server

import "sync"

// Output buffers. A connection's outbox (client.out) is handed to its
// transport on every flush; instead of keeping one buffer per connection
// (memory held by idle connections) or dropping big ones (a busy
// connection then re-grows its buffer on every flush, copying each byte
// again at every doubling), flushed buffers go back to a server-wide pool
// and the next outbox takes one from it when it first needs room.

// Buffers are pooled up to maxPooledOut bytes of capacity; a bigger one
// (a rare burst) is left to the collector. minOut is the smallest buffer
// handed out, so small answers do not start from a few bytes.
const (
	maxPooledOut = 8 << 20
	minOut       = 16 << 10
)

// outPool recycles output buffers between the connections of one server.
type outPool struct {
	p sync.Pool // of *[]byte
}

// get returns an empty buffer with room for at least n bytes.
func (o *outPool) get(n int) []byte {
	if v, ok := o.p.Get().(*[]byte); ok {
		if b := *v; cap(b) >= n {
			return b[:0]
		}
		// too small for this burst: let it go, allocate a fitting one
	}
	return make([]byte, 0, max(n, minOut))
}

// put gives b back once its bytes are written. b must not be used after.
func (o *outPool) put(b []byte) {
	if cap(b) < minOut || cap(b) > maxPooledOut {
		return
	}
	b = b[:0]
	o.p.Put(&b)
}
