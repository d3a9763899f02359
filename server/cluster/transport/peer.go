package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

type outMsg struct {
	group uint64
	m     *pb.Message
	size  int  // proto.Size(m), counted in peer.bytes while queued
	snap  bool // a snapshot over MaxFrame, sent in chunks (peer.snap held)
}

// peer is the sending half of a link: a bounded queue drained by one
// goroutine (runPeer) that owns the outbound connection.
type peer struct {
	Peer
	q      chan outMsg
	bytes  atomic.Int64    // encoded size of what q holds
	snap   atomic.Bool     // a chunked snapshot is queued or being sent
	ctx    context.Context // cancelled by RemovePeer or Close
	cancel context.CancelFunc
	done   chan struct{}
}

func newPeer(parent context.Context, p Peer, queue int) *peer {
	ctx, cancel := context.WithCancel(parent)
	return &peer{Peer: p, q: make(chan outMsg, queue), ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// runPeer dials the peer, sends its queue, and on a failed dial or link
// drops what is queued and dials again after a backoff that doubles from
// MinBackoff to MaxBackoff, until the peer is removed or the transport
// closed.
func (t *Transport) runPeer(p *peer) {
	defer t.wg.Done()
	defer close(p.done)
	backoff := t.opts.MinBackoff
	for p.ctx.Err() == nil {
		conn, err := t.dial(p)
		if err != nil {
			if p.ctx.Err() != nil {
				return
			}
			t.st.dialFailures.Add(1)
			t.unreachable(p)
			t.dropQueued(p)
			tm := time.NewTimer(backoff)
			select {
			case <-tm.C:
			case <-p.ctx.Done():
				tm.Stop()
				return
			}
			backoff = min(2*backoff, t.opts.MaxBackoff)
			continue
		}
		t.st.dials.Add(1)
		backoff = t.opts.MinBackoff
		if err := t.write(p, conn); err != nil && p.ctx.Err() == nil {
			t.st.linkErrors.Add(1)
			t.unreachable(p)
		}
		conn.Close()
	}
}

func (t *Transport) dial(p *peer) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(p.ctx, t.opts.DialTimeout)
	defer cancel()
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: t.opts.Creds.client(p.Name)}
	return d.DialContext(ctx, "tcp", p.Addr)
}

func (t *Transport) unreachable(p *peer) {
	if t.opts.OnUnreachable != nil {
		t.opts.OnUnreachable(p.ID)
	}
}

// dropQueued empties p's queue, counting each message as unreachable:
// raft resends what still matters once the peer answers again.
func (t *Transport) dropQueued(p *peer) {
	for {
		select {
		case om := <-p.q:
			p.bytes.Add(-int64(om.size))
			if om.snap {
				p.snap.Store(false)
			}
			t.st.unreachable.Add(1)
			t.snapDone(om.group, om.m, false)
		default:
			return
		}
	}
}

// write sends p's queue over conn, flushing whenever the queue is empty,
// until a write fails (returned) or the peer is stopped (nil).
func (t *Transport) write(p *peer, conn net.Conn) error {
	stop := context.AfterFunc(p.ctx, func() { conn.Close() }) // unblocks a write
	defer stop()
	// The peer never writes on this link, so a read that returns means it
	// closed it (it restarted, or took a newer link from this node): close
	// our end too, so the next write fails and the link is dialled again
	// rather than writing into a dead socket.
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		io.Copy(io.Discard, conn)
		conn.Close()
	}()
	w := bufio.NewWriterSize(conn, 64<<10)
	var buf []byte
	for {
		var om outMsg
		select {
		case om = <-p.q:
			p.bytes.Add(-int64(om.size))
		case <-p.ctx.Done():
			return nil
		}
		if om.snap {
			err := t.writeSnapshot(w, conn, om)
			p.snap.Store(false)
			t.snapDone(om.group, om.m, err == nil)
			if err != nil {
				t.st.snapsFailed.Add(1)
				return err
			}
			t.st.snapsSent.Add(1)
			t.st.sent.Add(1)
			continue
		}
		b, err := appendFrame(buf[:0], om.group, om.m, t.opts.MaxFrame)
		if err != nil {
			t.st.oversize.Add(1)
			t.snapDone(om.group, om.m, false)
			continue
		}
		buf = b
		conn.SetWriteDeadline(time.Now().Add(t.opts.WriteTimeout))
		if _, err := w.Write(buf); err != nil {
			t.snapDone(om.group, om.m, false)
			return err
		}
		t.snapDone(om.group, om.m, true)
		t.st.sent.Add(1)
		if len(p.q) == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}
