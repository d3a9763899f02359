package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"sync"
	"time"
)

// Fetches: a stream one node pulls from a peer for one group (a
// replica restoring its state machine's data from another's:
// cluster.Group.Fetch). Each fetch has a connection of its own, dialled
// to the peer's listener with the same mutual TLS as the raft links and
// told apart from them by ALPN (fetchProto; a raft link offers
// raftProto, or nothing), so a long stream never holds up heartbeats.
// The client sends one request frame (the length of what follows, 4
// bytes big-endian, the group ID, 8 bytes, then the request, at most
// maxFetchRequest bytes); the server answers with chunk frames: the
// payload's length (4 bytes), its kind (data, end, error), the
// payload's CRC-32 (IEEE, 4 bytes), the payload (data: at most
// ChunkSize bytes; error: the server's message). The client checks
// every chunk's CRC and refuses the stream at the first bad one
// (ErrBadChunk). At most MaxFetches fetches are served at once and as
// many made; each is bounded by FetchTimeout and MaxFetchBytes, and
// each read or write by IdleTimeout or WriteTimeout.
const (
	raftProto       = "fibril-raft/1"
	fetchProto      = "fibril-fetch/1"
	maxFetchRequest = 64 << 10
	fetchHeader     = 4 + 1 + 4
	maxErrText      = 1 << 10
)

// Chunk kinds of a fetch stream.
const (
	kindData byte = iota
	kindEnd
	kindError
)

// Fetch errors.
var (
	// ErrFetchBusy: MaxFetches fetches are already made (or, from the
	// server, served) at once. Retry later.
	ErrFetchBusy = errors.New("transport: too many fetches at once")
	// ErrFetchFailed: the server ended the stream with an error (its
	// message follows), or does not serve fetches.
	ErrFetchFailed = errors.New("transport: fetch failed")
	// ErrFetchTooLarge: a stream passed MaxFetchBytes.
	ErrFetchTooLarge = errors.New("transport: fetch too large")
)

// Fetch opens a stream of group from the peer to: what its
// Options.OnFetch writes for req. The stream ends (io.EOF) where the
// server's does; a server's error, a bad chunk (ErrBadChunk), a stream
// over MaxFetchBytes, FetchTimeout, IdleTimeout between chunks or ctx
// ending fail it. The caller must Close it. It fails at once for no
// such peer, past MaxFetches (ErrFetchBusy), or when the dial fails.
func (t *Transport) Fetch(ctx context.Context, to, group uint64, req []byte) (io.ReadCloser, error) {
	if len(req) > maxFetchRequest {
		return nil, fmt.Errorf("transport: fetch request of %d bytes, at most %d", len(req), maxFetchRequest)
	}
	t.mu.RLock()
	pr, closed := t.peers[to], t.closed
	t.mu.RUnlock()
	switch {
	case closed:
		return nil, ErrClosed
	case pr == nil:
		return nil, fmt.Errorf("transport: fetch from %d: not a peer", to)
	}
	select {
	case t.fetchOut <- struct{}{}:
	default:
		return nil, fmt.Errorf("%w: %d made", ErrFetchBusy, t.opts.MaxFetches)
	}
	release := sync.OnceFunc(func() { <-t.fetchOut })
	dctx, cancel := context.WithTimeout(ctx, t.opts.DialTimeout)
	cfg := t.opts.Creds.client(pr.Name)
	cfg.NextProtos = []string{fetchProto}
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	conn, err := d.DialContext(dctx, "tcp", pr.Addr)
	cancel()
	if err != nil {
		release()
		return nil, fmt.Errorf("transport: fetch from %s: %w", pr.Name, err)
	}
	if conn.(*tls.Conn).ConnectionState().NegotiatedProtocol != fetchProto {
		conn.Close()
		release()
		return nil, fmt.Errorf("%w: %s serves no fetches", ErrFetchFailed, pr.Name)
	}
	end := time.Now().Add(t.opts.FetchTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
		end = dl
	}
	stopCtx := context.AfterFunc(ctx, func() { conn.Close() }) // unblocks a read
	stopT := context.AfterFunc(t.ctx, func() { conn.Close() }) // Close cuts it too
	stop := func() { stopCtx(); stopT() }
	conn.SetWriteDeadline(time.Now().Add(t.opts.WriteTimeout))
	frame := binary.BigEndian.AppendUint32(nil, uint32(8+len(req)))
	frame = binary.BigEndian.AppendUint64(frame, group)
	if _, err := conn.Write(append(frame, req...)); err != nil {
		stop()
		conn.Close()
		release()
		return nil, fmt.Errorf("transport: fetch from %s: send request: %w", pr.Name, err)
	}
	t.st.fetches.Add(1)
	return &fetchReader{t: t, conn: conn, r: bufio.NewReaderSize(conn, 64<<10), name: pr.Name, end: end,
		close: func() { stop(); conn.Close(); release() }}, nil
}

// fetchReader is a fetch's stream on the client.
type fetchReader struct {
	t     *Transport
	conn  net.Conn
	r     *bufio.Reader
	name  string
	end   time.Time
	buf   []byte // the current chunk's payload
	cur   []byte // what of it is not yet read
	total int64
	err   error // sticky: io.EOF at the end
	once  sync.Once
	close func()
}

func (f *fetchReader) Read(b []byte) (int, error) {
	for len(f.cur) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.err = f.next()
		if f.err != nil && f.err != io.EOF {
			f.t.st.fetchErrors.Add(1)
		}
	}
	n := copy(b, f.cur)
	f.cur = f.cur[n:]
	return n, nil
}

// next reads the next chunk into f.cur, or returns why there is none.
func (f *fetchReader) next() error {
	f.conn.SetReadDeadline(within(f.t.opts.IdleTimeout, f.end))
	var hdr [fetchHeader]byte
	if _, err := io.ReadFull(f.r, hdr[:]); err != nil {
		return fmt.Errorf("transport: fetch from %s: %w", f.name, noEOF(err))
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	kind, crc := hdr[4], binary.BigEndian.Uint32(hdr[5:])
	switch {
	case kind == kindData && n > f.t.opts.ChunkSize, kind == kindError && n > maxErrText, kind == kindEnd && n != 0, kind > kindError:
		return fmt.Errorf("%w: fetch from %s: chunk of kind %d, %d bytes", ErrBadChunk, f.name, kind, n)
	case kind == kindData && f.total+int64(n) > f.t.opts.MaxFetchBytes:
		return fmt.Errorf("%w: fetch from %s passed %d bytes", ErrFetchTooLarge, f.name, f.t.opts.MaxFetchBytes)
	}
	if cap(f.buf) < n {
		f.buf = make([]byte, n)
	}
	f.buf = f.buf[:n]
	if _, err := io.ReadFull(f.r, f.buf); err != nil {
		return fmt.Errorf("transport: fetch from %s: %w", f.name, noEOF(err))
	}
	if crc32.ChecksumIEEE(f.buf) != crc {
		return fmt.Errorf("%w: fetch from %s: chunk at %d: checksum mismatch", ErrBadChunk, f.name, f.total)
	}
	switch kind {
	case kindEnd:
		return io.EOF
	case kindError:
		return fmt.Errorf("%w: %s: %s", ErrFetchFailed, f.name, f.buf)
	}
	f.total += int64(n)
	f.cur = f.buf
	return nil
}

// noEOF turns a stream cut short into io.ErrUnexpectedEOF: only an end
// chunk ends a fetch.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Close ends the fetch (a stream not read to its end is cut).
func (f *fetchReader) Close() error {
	f.once.Do(f.close)
	return nil
}

// serveFetch answers one fetch connection from peer pr.
func (t *Transport) serveFetch(tc *tls.Conn, pr Peer) {
	end := time.Now().Add(t.opts.FetchTimeout)
	w := &fetchWriter{t: t, conn: tc, w: bufio.NewWriterSize(tc, 64<<10), end: end}
	select {
	case t.fetchIn <- struct{}{}:
		defer func() { <-t.fetchIn }()
	default:
		t.st.fetchErrors.Add(1)
		w.fail(fmt.Errorf("%w: %d served", ErrFetchBusy, t.opts.MaxFetches))
		return
	}
	tc.SetReadDeadline(within(t.opts.IdleTimeout, end))
	var hdr [headerLen]byte
	if _, err := io.ReadFull(tc, hdr[:]); err != nil {
		t.st.fetchErrors.Add(1)
		return
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n < 8 || n > 8+maxFetchRequest {
		t.st.badFrames.Add(1)
		return
	}
	group := binary.BigEndian.Uint64(hdr[4:])
	req := make([]byte, n-8)
	if _, err := io.ReadFull(tc, req); err != nil {
		t.st.fetchErrors.Add(1)
		return
	}
	var err error
	if t.opts.OnFetch == nil {
		err = errors.New("this node serves no fetches")
	} else {
		err = t.opts.OnFetch(pr.ID, group, req, w)
	}
	if err == nil {
		err = w.chunk(kindData, w.pend)
	}
	if err == nil {
		err = w.chunk(kindEnd, nil)
	}
	if err == nil {
		err = w.flush()
	}
	if err != nil {
		t.st.fetchErrors.Add(1)
		w.fail(err)
		return
	}
	t.st.fetchesServed.Add(1)
}

// fetchWriter is the io.Writer a fetch's server writes its stream to:
// it cuts it into chunks of ChunkSize.
type fetchWriter struct {
	t      *Transport
	conn   net.Conn
	w      *bufio.Writer
	end    time.Time
	pend   []byte
	total  int64
	chunks int
	broken error // a failed write: the connection is done
}

func (w *fetchWriter) Write(b []byte) (int, error) {
	size := w.t.opts.ChunkSize
	n := len(b)
	for len(b) > 0 {
		if w.broken != nil {
			return 0, w.broken
		}
		if w.total+int64(len(w.pend)) >= w.t.opts.MaxFetchBytes {
			return 0, fmt.Errorf("%w: over %d bytes", ErrFetchTooLarge, w.t.opts.MaxFetchBytes)
		}
		k := min(len(b), size-len(w.pend))
		w.pend = append(w.pend, b[:k]...)
		b = b[k:]
		if len(w.pend) == size {
			if err := w.chunk(kindData, w.pend); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// chunk writes one chunk (a data chunk only if p holds something).
func (w *fetchWriter) chunk(kind byte, p []byte) error {
	if w.broken != nil {
		return w.broken
	}
	if kind == kindData && len(p) == 0 {
		return nil
	}
	var hdr [fetchHeader]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(p)))
	hdr[4] = kind
	binary.BigEndian.PutUint32(hdr[5:], crc32.ChecksumIEEE(p))
	if w.t.testChunk != nil && kind == kindData {
		p = w.t.testChunk(w.chunks, p)
	}
	w.conn.SetWriteDeadline(within(w.t.opts.WriteTimeout, w.end))
	if _, err := w.w.Write(hdr[:]); err != nil {
		w.broken = err
		return err
	}
	if _, err := w.w.Write(p); err != nil {
		w.broken = err
		return err
	}
	if kind == kindData {
		w.total += int64(len(p))
		w.chunks++
		w.pend = w.pend[:0]
	}
	return nil
}

func (w *fetchWriter) flush() error {
	if w.broken != nil {
		return w.broken
	}
	w.conn.SetWriteDeadline(within(w.t.opts.WriteTimeout, w.end))
	if err := w.w.Flush(); err != nil {
		w.broken = err
	}
	return w.broken
}

// fail ends the stream with an error chunk, if the connection still
// takes one.
func (w *fetchWriter) fail(err error) {
	msg := []byte(err.Error())
	if len(msg) > maxErrText {
		msg = msg[:maxErrText]
	}
	if w.chunk(kindError, msg) == nil {
		w.flush()
	}
}

// within is the deadline d from now, or end if that is sooner.
func within(d time.Duration, end time.Time) time.Time {
	if t := time.Now().Add(d); t.Before(end) {
		return t
	}
	return end
}
