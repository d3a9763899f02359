package server

// Pausing reads (SPEC.md 7.5: a publisher is slowed by TCP, never cut).
//
// gnet reads every connection whatever its handler does: what OnTraffic
// leaves unparsed is appended to the connection's inbound buffer, which has
// no bound, and gnet has no call to stop reading one connection
// (panjf2000/gnet#712, #722). So a connection whose commands must wait (its
// durable publishes are behind a slow topic: the lane is full) used to grow
// that buffer up to MaxInputBuffer and was then cut with max_payload.
//
// Such a connection is moved off its event loop instead: its socket is
// duplicated into a *net.TCPConn served by a reader and a writer goroutine
// (the same loops as the TLS listener, conn_tls.go), the unparsed input is
// carried over, and the gnet connection is closed (the duplicate keeps the
// socket open; OnClose sees the move and does not tear the client down).
// The reader goroutine reads nothing while the lane is full, so the
// kernel's receive window closes and TCP slows the publisher. The client,
// its subscriptions and its outbox stay as they are; only the transport
// under it changes (gnetConn forwards wakes to the new one). A moved
// connection stays on goroutines until it closes. BENCHMARKS.md "Pausing
// reads" has the measurements behind this choice.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// moveThreshold is the unparsed input of a connection whose parsing waits
// for its lane past which it is moved off gnet. Below it, gnet's buffer is
// a short wait's worth; a connection that never waits long is never moved.
const moveThreshold = 256 << 10

// errNotTCP: the duplicated socket is not a TCP connection.
var errNotTCP = errors.New("server: moved connection is not TCP")

// movedConns tracks the connections moved off gnet, to close them when the
// server stops and wait for their goroutines.
type movedConns struct {
	mu   sync.Mutex
	open map[*netConn]struct{}
	wg   sync.WaitGroup
	// all moves every connection after its first input (set by the
	// benchmark comparing the two transports, never otherwise).
	all atomic.Bool
}

func (m *movedConns) add(tc *netConn) {
	m.mu.Lock()
	if m.open == nil {
		m.open = make(map[*netConn]struct{})
	}
	m.open[tc] = struct{}{}
	m.mu.Unlock()
}

func (m *movedConns) remove(tc *netConn) {
	m.mu.Lock()
	delete(m.open, tc)
	m.mu.Unlock()
}

// stop shuts every moved connection and waits for its goroutines.
func (m *movedConns) stop() {
	m.mu.Lock()
	for tc := range m.open {
		tc.shut()
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// shouldMove reports whether the connection must leave its event loop: its
// parsing waits for the lane and gnet holds more than moveThreshold of its
// input. Output gnet still holds would be lost on the move (gnet closes
// its side with whatever the socket does not take at once), so then it
// waits for the next callback.
func shouldMove(c gnet.Conn, cl *client) bool {
	waits := (cl.lane.stall.Load() || cl.stall.sub.Load() != nil) && c.InboundBuffered() > moveThreshold
	if cl.srv.moved.all.Load() {
		waits = true
	}
	return waits && c.OutboundBuffered() == 0 && !cl.isClosing()
}

// moveOff moves the connection to a reader and a writer goroutine. It
// runs on the event loop in OnTraffic; on success the caller returns
// gnet.Close. On failure nothing changed.
func (h *gnetHandler) moveOff(c gnet.Conn, cl *client, gc *gnetConn) error {
	fd, err := unix.Dup(c.Fd())
	if err != nil {
		return fmt.Errorf("server: dup connection fd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "fibril-conn")
	nc, err := net.FileConn(f) // dups again: f is closed below either way
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("server: connection from fd: %w", err)
	}
	tcp, ok := nc.(*net.TCPConn)
	if !ok {
		_ = nc.Close()
		return errNotTCP
	}
	n := c.InboundBuffered()
	buf := make([]byte, n, min(max(2*n, 32<<10), h.s.opts.MaxInputBuffer))
	if n > 0 {
		in, err := c.Peek(n)
		if err != nil {
			_ = tcp.Close()
			return fmt.Errorf("server: read buffered input: %w", err)
		}
		copy(buf, in)
		_, _ = c.Discard(n)
	}
	s := h.s
	tc := newNetConn(tcp, gc.remote, false)
	gc.moved.Store(tc)
	s.moved.add(tc)
	s.moved.wg.Add(2)
	go func() {
		defer s.moved.wg.Done()
		s.writeLoop(tcp, tc, cl)
	}()
	go func() {
		defer s.moved.wg.Done()
		defer s.moved.remove(tc)
		defer cl.teardown()
		defer tc.shut()
		s.readLoop(tcp, tc, cl, buf)
	}()
	// The outbox was not flushed on the loop: the writer takes it (and
	// clears the wake flag beginInput set).
	tc.wake()
	s.stats.moved.Add(1)
	cl.log.Debug("connection moved off its event loop: its input waits for the lane", "buffered", n)
	return nil
}
