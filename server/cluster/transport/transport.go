package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// MaxPeers bounds the peers of one transport (each is a goroutine and a
// queue).
const MaxPeers = 1024

// Errors of AddPeer and the methods called after Close.
var (
	// ErrClosed is returned by methods called after Close.
	ErrClosed = errors.New("transport: closed")
	// ErrPeerExists: AddPeer was given an ID already a peer.
	ErrPeerExists = errors.New("transport: peer already added")
)

// Options configure a Transport. Zero durations and sizes take the
// defaults named.
type Options struct {
	// ID is this node's raft ID and Name its name, which its certificate
	// must carry (as a DNS name).
	ID   uint64
	Name string
	// Listen is the address to listen on ("127.0.0.1:0" picks a port).
	Listen string
	// Creds is this node's identity and the cluster CA (required).
	Creds *Credentials
	// Handler gets each message received, with its group, on the
	// goroutine of the connection it came on. It must not block, and may
	// keep the message.
	Handler func(group uint64, m *pb.Message)
	// OnUnreachable, if set, is called with a peer's ID when a dial to it
	// or its link fails, on that peer's sender goroutine (so that raft can
	// stop streaming appends to it: RawNode.ReportUnreachable). It must
	// not block.
	OnUnreachable func(id uint64)
	// OnSnapshot, if set, is called with a MsgSnap's group and target
	// once the transport wrote it (ok) or dropped it (not ok: no peer,
	// too large, a full queue, another snapshot in flight to that peer,
	// a failed link), on the goroutine of Send or of the peer's sender.
	// It must not block.
	OnSnapshot func(group, to uint64, ok bool)
	// QueueLen and QueueBytes bound each peer's send queue (defaults 4096
	// messages, 64 MiB of encoded messages).
	QueueLen, QueueBytes int
	// MaxFrame bounds a frame after its length, group ID included
	// (default 16 MiB).
	MaxFrame int
	// MaxInbound bounds the accepted connections held at once,
	// handshaking or live (default 64); it must exceed the number of
	// peers, each of which holds one.
	MaxInbound int
	// DialTimeout bounds a dial and its TLS handshake, and an accepted
	// connection's handshake (default 2 s).
	DialTimeout time.Duration
	// WriteTimeout bounds one write to a peer (default 5 s) and
	// IdleTimeout the wait for the next frame from one (default 30 s;
	// raft's heartbeats keep a live link busier than that).
	WriteTimeout, IdleTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between failed dials to a
	// peer, which doubles from the first to the second (defaults 20 ms,
	// 1 s).
	MinBackoff, MaxBackoff time.Duration
	// A snapshot message over MaxFrame travels in chunks (snapshot.go):
	// MaxSnapshot bounds its size (default 1 GiB), ChunkSize a chunk
	// (default 1 MiB or MaxFrame less 36 bytes, the smaller, and at most
	// that), SnapshotTimeout a
	// transfer, sent or received (default 1 min), and SnapshotDir is
	// where a received one is assembled (default os.TempDir()).
	MaxSnapshot, ChunkSize int
	SnapshotTimeout        time.Duration
	SnapshotDir            string
	// OnFetch, if set, answers a peer's fetch (fetch.go) for group: it
	// writes the stream req asks for to w (cut into chunks of
	// ChunkSize) and returns nil at its end, or an error the fetching
	// peer reads as the stream's. It runs on the fetch connection's
	// goroutine and may block on w, within FetchTimeout. Without it
	// fetches are answered with an error.
	OnFetch func(from, group uint64, req []byte, w io.Writer) error
	// MaxFetches bounds the fetches served at once, and those made at
	// once (default 4; past it ErrFetchBusy). FetchTimeout bounds one
	// (default 30 min), MaxFetchBytes its stream (default 1 TiB).
	MaxFetches    int
	FetchTimeout  time.Duration
	MaxFetchBytes int64
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.ID == 0 || o.Name == "":
		return o, errors.New("transport: options need an ID and a name")
	case o.Creds == nil:
		return o, errors.New("transport: options need credentials (mutual TLS is required)")
	case o.Handler == nil:
		return o, errors.New("transport: options need a handler")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.QueueLen, 4096)
	def(&o.QueueBytes, 64<<20)
	def(&o.MaxFrame, 16<<20)
	def(&o.MaxInbound, 64)
	defd(&o.DialTimeout, 2*time.Second)
	defd(&o.WriteTimeout, 5*time.Second)
	defd(&o.IdleTimeout, 30*time.Second)
	defd(&o.MinBackoff, 20*time.Millisecond)
	defd(&o.MaxBackoff, time.Second)
	def(&o.MaxSnapshot, 1<<30)
	def(&o.ChunkSize, min(1<<20, o.MaxFrame-8-chunkHeader))
	defd(&o.SnapshotTimeout, time.Minute)
	def(&o.MaxFetches, 4)
	defd(&o.FetchTimeout, 30*time.Minute)
	if o.MaxFetchBytes <= 0 {
		o.MaxFetchBytes = 1 << 40
	}
	if o.SnapshotDir == "" {
		o.SnapshotDir = os.TempDir()
	}
	if o.ChunkSize > o.MaxFrame-8-chunkHeader {
		return o, fmt.Errorf("transport: ChunkSize %d does not fit MaxFrame %d", o.ChunkSize, o.MaxFrame)
	}
	if o.MaxBackoff < o.MinBackoff {
		return o, fmt.Errorf("transport: MaxBackoff %v below MinBackoff %v", o.MaxBackoff, o.MinBackoff)
	}
	return o, nil
}

// Peer is another node: its raft ID, its name (which its certificate
// carries) and its cluster address.
type Peer struct {
	ID         uint64
	Name, Addr string
}

// Stats are a transport's counters since New.
type Stats struct {
	Sent, Received uint64
	// DroppedFull counts messages dropped because the peer's queue was
	// full, Unreachable those dropped while the peer could not be dialled,
	// NoPeer those for an ID that is not a peer, Oversize those whose frame
	// was over MaxFrame.
	DroppedFull, Unreachable, NoPeer, Oversize uint64
	// Dials counts connections made, DialFailures dials or handshakes
	// that failed, LinkErrors established outbound links that failed.
	Dials, DialFailures, LinkErrors uint64
	// Refused counts inbound connections refused: over MaxInbound, a
	// failed handshake (no certificate, or one not from the cluster CA),
	// or a certificate naming no peer. BadFrames counts inbound
	// connections cut for a bad or oversized frame, Forged those cut for a
	// message from another sender than the certificate's.
	Refused, BadFrames, Forged uint64
	// SnapshotsSent and SnapshotsReceived count snapshots that travelled
	// in chunks; SnapshotsFailed those whose transfer failed either way
	// (a write error or timeout, a bad chunk, no room to assemble).
	SnapshotsSent, SnapshotsReceived, SnapshotsFailed uint64
	// Fetches counts fetches made, FetchesServed those served to their
	// end, FetchErrors fetches that failed either way (refused busy, a
	// bad chunk, a server's error, a cut or slow stream).
	Fetches, FetchesServed, FetchErrors uint64
}

type counters struct {
	sent, received, droppedFull, unreachable, noPeer, oversize  atomic.Uint64
	dials, dialFailures, linkErrors, refused, badFrames, forged atomic.Uint64
	snapsSent, snapsReceived, snapsFailed                       atomic.Uint64
	fetches, fetchesServed, fetchErrors                         atomic.Uint64
}

// Transport links this node to its peers. Its methods are safe for
// concurrent use.
type Transport struct {
	opts   Options
	ln     net.Listener
	srvTLS *tls.Config
	sem    chan struct{} // one token per accepted connection held
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	st     counters
	xfers  atomic.Uint64 // snapshot transfers started, numbering them
	// fetchIn and fetchOut hold a token per fetch served and made.
	fetchIn, fetchOut chan struct{}
	// testChunk, for tests, may replace a data chunk's bytes after its
	// CRC is taken (a chunk damaged in transit).
	testChunk func(i int, p []byte) []byte

	mu      sync.RWMutex // guards the fields below
	closed  bool
	peers   map[uint64]*peer
	inbound map[uint64]net.Conn   // the live inbound link of each peer
	conns   map[net.Conn]struct{} // every accepted connection, for Close
}

// New listens on opts.Listen and starts accepting peers' connections.
// It fails on bad options or when it cannot listen.
func New(opts Options) (*Transport, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("transport: listen %s: %w", o.Listen, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{opts: o, ln: ln, srvTLS: o.Creds.server(), sem: make(chan struct{}, o.MaxInbound),
		ctx: ctx, cancel: cancel, fetchIn: make(chan struct{}, o.MaxFetches), fetchOut: make(chan struct{}, o.MaxFetches), peers: map[uint64]*peer{}, inbound: map[uint64]net.Conn{}, conns: map[net.Conn]struct{}{}}
	t.wg.Add(1)
	go t.accept()
	return t, nil
}

// Addr returns the address the transport listens on.
func (t *Transport) Addr() net.Addr { return t.ln.Addr() }

// AddPeer starts the link to p; messages to p.ID are queued for it from
// now on. It fails for this node's own ID, an ID already a peer
// (ErrPeerExists), or after Close (ErrClosed).
func (t *Transport) AddPeer(p Peer) error {
	if p.ID == 0 || p.ID == t.opts.ID || p.Name == "" || p.Addr == "" {
		return fmt.Errorf("transport: bad peer %+v", p)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	if _, ok := t.peers[p.ID]; ok {
		return fmt.Errorf("%w: %d (%s)", ErrPeerExists, p.ID, p.Name)
	}
	if len(t.peers) >= MaxPeers {
		return fmt.Errorf("transport: peer %s: already %d peers", p.Name, MaxPeers)
	}
	pr := newPeer(t.ctx, p, t.opts.QueueLen)
	t.peers[p.ID] = pr
	t.wg.Add(1)
	go t.runPeer(pr)
	return nil
}

// RemovePeer stops the links to and from the peer id, dropping what was
// queued for it, and waits for its sender to end.
func (t *Transport) RemovePeer(id uint64) {
	t.mu.Lock()
	pr := t.peers[id]
	delete(t.peers, id)
	in := t.inbound[id]
	t.mu.Unlock()
	if in != nil {
		in.Close()
	}
	if pr != nil {
		pr.cancel()
		<-pr.done
	}
}

// Send queues msgs for their peers (m.To) under group. It never blocks:
// a message for a peer whose queue is full, or for no peer, is dropped
// and counted. It keeps the messages, not the slice; they must not be
// changed afterwards.
func (t *Transport) Send(group uint64, msgs []*pb.Message) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, m := range msgs {
		pr := t.peers[m.GetTo()]
		if pr == nil {
			t.st.noPeer.Add(1)
			t.snapDone(group, m, false)
			continue
		}
		size := proto.Size(m)
		if 8+size > t.opts.MaxFrame {
			// A snapshot goes in chunks, one per peer at a time; its
			// bytes are raft's already, so they are not counted in
			// QueueBytes.
			switch {
			case m.GetType() != pb.MessageType_MsgSnap || size > t.opts.MaxSnapshot:
				t.st.oversize.Add(1)
				t.snapDone(group, m, false)
			case !pr.snap.CompareAndSwap(false, true):
				t.st.droppedFull.Add(1)
				t.snapDone(group, m, false)
			default:
				select {
				case pr.q <- outMsg{group: group, m: m, snap: true}:
				default:
					pr.snap.Store(false)
					t.st.droppedFull.Add(1)
					t.snapDone(group, m, false)
				}
			}
			continue
		}
		if pr.bytes.Add(int64(size)) > int64(t.opts.QueueBytes) {
			pr.bytes.Add(-int64(size))
			t.st.droppedFull.Add(1)
			t.snapDone(group, m, false)
			continue
		}
		select {
		case pr.q <- outMsg{group: group, m: m, size: size}:
		default:
			pr.bytes.Add(-int64(size))
			t.st.droppedFull.Add(1)
			t.snapDone(group, m, false)
		}
	}
}

// GroupLink sends one group's messages over a Transport (it is what a
// cluster.Group takes as its transport).
type GroupLink struct {
	t     *Transport
	group uint64
}

// Group returns the link for group.
func (t *Transport) Group(group uint64) GroupLink { return GroupLink{t, group} }

// Send is Transport.Send for the link's group.
func (l GroupLink) Send(msgs []*pb.Message) { l.t.Send(l.group, msgs) }

// ReportsSnapshots is true: a Transport reports each MsgSnap's outcome
// to Options.OnSnapshot.
func (GroupLink) ReportsSnapshots() bool { return true }

// snapDone reports m's outcome to OnSnapshot if it is a snapshot.
func (t *Transport) snapDone(group uint64, m *pb.Message, ok bool) {
	if t.opts.OnSnapshot != nil && m.GetType() == pb.MessageType_MsgSnap {
		t.opts.OnSnapshot(group, m.GetTo(), ok)
	}
}

// Stats returns the counters.
func (t *Transport) Stats() Stats {
	c := &t.st
	return Stats{Sent: c.sent.Load(), Received: c.received.Load(), DroppedFull: c.droppedFull.Load(),
		Unreachable: c.unreachable.Load(), NoPeer: c.noPeer.Load(), Oversize: c.oversize.Load(),
		Dials: c.dials.Load(), DialFailures: c.dialFailures.Load(), LinkErrors: c.linkErrors.Load(),
		Refused: c.refused.Load(), BadFrames: c.badFrames.Load(), Forged: c.forged.Load(),
		SnapshotsSent: c.snapsSent.Load(), SnapshotsReceived: c.snapsReceived.Load(), SnapshotsFailed: c.snapsFailed.Load(),
		Fetches: c.fetches.Load(), FetchesServed: c.fetchesServed.Load(), FetchErrors: c.fetchErrors.Load()}
}

// Close stops listening, cuts every link and waits for every goroutine
// the transport started.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.cancel()
	err := t.ln.Close()
	t.wg.Wait()
	if err != nil {
		return fmt.Errorf("transport: close listener: %w", err)
	}
	return nil
}

func (t *Transport) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if t.ctx.Err() != nil {
				return
			}
			// Out of file descriptors or similar: wait rather than spin.
			select {
			case <-time.After(t.opts.MinBackoff):
			case <-t.ctx.Done():
				return
			}
			continue
		}
		select {
		case t.sem <- struct{}{}:
		default:
			t.st.refused.Add(1)
			c.Close()
			continue
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			c.Close()
			<-t.sem
			return
		}
		t.conns[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go t.serve(c)
	}
}

// serve reads one inbound connection: handshake, identify the peer, then
// frames until an error, Close, or the peer connecting again.
func (t *Transport) serve(c net.Conn) {
	defer t.wg.Done()
	defer func() {
		c.Close()
		t.mu.Lock()
		delete(t.conns, c)
		t.mu.Unlock()
		<-t.sem
	}()
	tc := tls.Server(c, t.srvTLS)
	ctx, cancel := context.WithTimeout(t.ctx, t.opts.DialTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		t.st.refused.Add(1)
		return
	}
	pr, err := t.identify(tc.ConnectionState())
	if err != nil {
		t.st.refused.Add(1)
		return
	}
	if tc.ConnectionState().NegotiatedProtocol == fetchProto {
		t.serveFetch(tc, pr) // a fetch's own connection, not the peer's link
		return
	}
	t.mu.Lock()
	if old := t.inbound[pr.ID]; old != nil {
		old.Close() // the peer reconnected: its old link is dead to it
	}
	t.inbound[pr.ID] = c
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		if t.inbound[pr.ID] == c {
			delete(t.inbound, pr.ID)
		}
		t.mu.Unlock()
	}()
	r := bufio.NewReaderSize(tc, 64<<10)
	var buf []byte
	var asm *assembly // a chunked snapshot being received
	defer func() { asm.drop() }()
	for {
		c.SetReadDeadline(time.Now().Add(t.opts.IdleTimeout))
		group, m, chunk, b, err := readFrame(r, buf, t.opts.MaxFrame)
		if err == nil && chunk != nil {
			if asm, m, err = t.chunk(asm, group, chunk); err != nil {
				t.st.snapsFailed.Add(1)
			} else if m != nil {
				t.st.snapsReceived.Add(1)
			}
		}
		buf = b
		if cap(buf) > 1<<20 {
			buf = nil // a snapshot's buffer is not kept for the heartbeats after it
		}
		if err != nil {
			if errors.Is(err, ErrFrameTooLarge) || errors.Is(err, ErrBadFrame) || errors.Is(err, ErrBadChunk) {
				t.st.badFrames.Add(1)
			}
			return
		}
		if m == nil {
			continue // a chunk of a snapshot not yet whole
		}
		if m.GetFrom() != pr.ID {
			t.st.forged.Add(1)
			return
		}
		t.st.received.Add(1)
		t.opts.Handler(group, m)
	}
}

// identify maps the client's verified certificate to the peer it names.
func (t *Transport) identify(cs tls.ConnectionState) (Peer, error) {
	if len(cs.PeerCertificates) == 0 {
		return Peer{}, errNoPeerCert
	}
	leaf := cs.PeerCertificates[0]
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, pr := range t.peers {
		if leaf.VerifyHostname(pr.Name) == nil {
			return pr.Peer, nil
		}
	}
	return Peer{}, fmt.Errorf("transport: certificate %q names no peer", leaf.Subject.CommonName)
}
