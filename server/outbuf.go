package server

import (
	"sync"

	"github.com/fibrilmq/fibril/server/broker"
)

// Output memory (SPEC.md "Limits": max_pending). What waits for a
// connection's socket is held in two places: the connection's outbox
// (client.out, below) until its owner hands it to the transport, and,
// for a gnet connection, gnet's outbound buffer for what the socket did
// not take at once. Both are counted against MaxPending by their bytes,
// so both must cost their bytes:
//
//   - The outbox is a list of pooled chunks (chunks), never one slice
//     grown by append: growing by doubling left each old buffer as garbage
//     and up to twice the bytes in capacity. Chunks go back to a
//     server-wide pool (outPool) once written, so an idle connection
//     holds none.
//   - gnet copies what the socket leaves into list nodes from a pool of
//     power-of-two sizes: a 33 KiB slice costs a 64 KiB node, an 8.1 MiB
//     POLL answer a 16 MiB one. The outbox is therefore handed over in
//     power-of-two pieces (transportPieces), each of which gnet stores in
//     a node of exactly its size, and at most transportWindow at a time.

// chunkSize is an outbox chunk and the largest piece handed to gnet;
// pooled buffers are powers of two from chunkSize to maxPooledOut (a frame
// bigger than a chunk gets a buffer of its own size class).
const (
	chunkSize    = 64 << 10
	outClasses   = 9 // chunkSize << 0 .. chunkSize << 8 (16 MiB)
	maxPooledOut = chunkSize << (outClasses - 1)
)

// outPool recycles output buffers between the connections of one server,
// by power-of-two size class.
type outPool struct {
	classes [outClasses]sync.Pool // of *[]byte
}

// classOf is the smallest class whose buffers hold n bytes; false when n
// is over maxPooledOut.
func classOf(n int) (int, bool) {
	for i := range outClasses {
		if n <= chunkSize<<i {
			return i, true
		}
	}
	return 0, false
}

// get returns an empty buffer with room for at least n bytes: a pooled
// one of n's size class, or a new one (of exactly n bytes past
// maxPooledOut).
func (o *outPool) get(n int) []byte {
	i, ok := classOf(n)
	if !ok {
		return make([]byte, 0, n)
	}
	if v, ok := o.classes[i].Get().(*[]byte); ok {
		return (*v)[:0]
	}
	return make([]byte, 0, chunkSize<<i)
}

// put gives b back once its bytes are written; b must not be used after.
// Only buffers of a class's exact capacity are kept.
func (o *outPool) put(b []byte) {
	i, ok := classOf(cap(b))
	if !ok || cap(b) != chunkSize<<i {
		return
	}
	b = b[:0]
	o.classes[i].Put(&b)
}

// putAll gives back every buffer of bufs and clears bufs' entries.
func (o *outPool) putAll(bufs [][]byte) {
	for _, b := range bufs {
		o.put(b)
	}
	clear(bufs)
}

// chunks is output waiting in order, kept as a list of pooled buffers.
// Appends fill the last buffer, then take a new one from the pool. The
// zero value is empty. Not safe for concurrent use (the outbox is guarded
// by client.mu).
type chunks struct {
	bufs [][]byte
	n    int // bytes in bufs
}

// room returns the last buffer if at least size bytes fit after its end,
// else a new buffer from p (appended to the list) with room for size. The
// caller appends at most size bytes to it and passes the result to commit.
func (q *chunks) room(p *outPool, size int) []byte {
	if k := len(q.bufs); k > 0 {
		if b := q.bufs[k-1]; cap(b)-len(b) >= size {
			return b
		}
	}
	b := p.get(size)
	q.bufs = append(q.bufs, b)
	return b
}

// commit records b, the buffer room returned with bytes appended, as the
// last buffer.
func (q *chunks) commit(b []byte) {
	k := len(q.bufs) - 1
	q.n += len(b) - len(q.bufs[k])
	q.bufs[k] = b
}

// write copies b to the end, across as many chunks as it takes.
func (q *chunks) write(p *outPool, b []byte) {
	for len(b) > 0 {
		buf := q.room(p, 1)
		n := min(cap(buf)-len(buf), len(b))
		q.commit(append(buf, b[:n]...))
		b = b[n:]
	}
}

// packLimit: a frame that does not fit in the last chunk's room but is at
// most this long starts a new chunk (leaving less than packLimit unused);
// a longer one is encoded apart and copied across chunks, so chunks stay
// full whatever the frames' sizes (two 33 KiB frames left half of every
// 64 KiB chunk unused).
const packLimit = chunkSize / 8

// appendDelivery encodes d's delivery frame (at most size bytes: see
// deliverySize) at the end of q.
func (q *chunks) appendDelivery(p *outPool, size int, d *broker.Delivery, sid string, crc, headers bool) {
	if k := len(q.bufs); size <= packLimit || (k > 0 && cap(q.bufs[k-1])-len(q.bufs[k-1]) >= size) {
		q.commit(appendDelivery(q.room(p, size), d, sid, crc, headers))
		return
	}
	frame := appendDelivery(p.get(size), d, sid, crc, headers)
	q.write(p, frame)
	p.put(frame)
}

// moveFrom appends o's buffers to q without copying them and empties o.
func (q *chunks) moveFrom(o *chunks) {
	q.bufs = append(q.bufs, o.bufs...)
	q.n += o.n
	clear(o.bufs)
	o.bufs, o.n = o.bufs[:0], 0
}

// takeUpTo appends q's first buffers to dst, as many as hold at most limit
// bytes but at least one (none when limit <= 0), and removes them from q;
// it returns dst and their bytes.
func (q *chunks) takeUpTo(dst [][]byte, limit int) ([][]byte, int) {
	if limit <= 0 {
		return dst, 0
	}
	k, n := 0, 0
	for k < len(q.bufs) && (k == 0 || n+len(q.bufs[k]) <= limit) {
		n += len(q.bufs[k])
		k++
	}
	if k == len(q.bufs) {
		return q.takeInto(dst)
	}
	dst = append(dst, q.bufs[:k]...)
	rest := copy(q.bufs, q.bufs[k:])
	clear(q.bufs[rest:])
	q.bufs = q.bufs[:rest]
	q.n -= n
	return dst, n
}

// takeInto appends q's buffers to dst, empties q (keeping its list's
// backing array for the next output) and returns dst and the bytes.
func (q *chunks) takeInto(dst [][]byte) ([][]byte, int) {
	dst = append(dst, q.bufs...)
	n := q.n
	clear(q.bufs)
	q.bufs, q.n = q.bufs[:0], 0
	return dst, n
}

// release gives q's buffers back to p and empties q.
func (q *chunks) release(p *outPool) {
	p.putAll(q.bufs)
	q.bufs, q.n = q.bufs[:0], 0
}

// Handing output to gnet (see the top of this file).
const (
	// transportWindow bounds what gnet holds for a connection: past it
	// the output stays in the outbox (one copy, in chunks that are reused
	// once written) and a drain poll (outbound.go) hands more over as the
	// socket takes it. Handed over whole, the output lived twice, in gnet's
	// nodes and in the chunks just written (kept by the pool until the
	// next collections).
	transportWindow = 1 << 20
	// minPiece: the tail of a buffer below it is handed over as one piece
	// (rounding it up wastes less than minPiece).
	minPiece = 512
	// maxPieces bounds the slices of one writev (the kernel takes at most
	// IOV_MAX = 1024).
	maxPieces = 512
)

// transportPieces appends to iov the slices of b: chunkSize pieces, then
// the rest cut by the binary digits of its length down to minPiece, then
// the last few bytes. Each is a power of two except that last one; a
// partial first piece (the socket took some of it) is what gnet may still
// round, by less than chunkSize.
func transportPieces(iov [][]byte, b []byte) [][]byte {
	for len(b) >= chunkSize {
		iov = append(iov, b[:chunkSize:chunkSize])
		b = b[chunkSize:]
	}
	for p := chunkSize >> 1; p >= minPiece; p >>= 1 {
		if len(b) >= p {
			iov = append(iov, b[:p:p])
			b = b[p:]
		}
	}
	if len(b) > 0 {
		iov = append(iov, b)
	}
	return iov
}

// vectorWriter is what writePieces needs of a transport (a gnet.Conn).
type vectorWriter interface {
	Writev(bs [][]byte) (int, error)
}

// writePieces writes bufs to w in transportPieces, at most maxPieces per
// call, using iov as scratch; it returns iov for reuse and the first
// error.
func writePieces(w vectorWriter, bufs [][]byte, iov [][]byte) ([][]byte, error) {
	iov = iov[:0]
	for _, b := range bufs {
		if len(iov) > 0 && len(iov)+len(b)/chunkSize+8 > maxPieces {
			if _, err := w.Writev(iov); err != nil {
				clear(iov)
				return iov[:0], err
			}
			clear(iov)
			iov = iov[:0]
		}
		iov = transportPieces(iov, b)
	}
	var err error
	if len(iov) > 0 {
		_, err = w.Writev(iov)
	}
	clear(iov)
	return iov[:0], err
}
