package fibril

import (
	"context"
	"fmt"

	"github.com/fibrilmq/fibril/protocol"
)

// readLoop decodes server frames on t and routes them: answers to the head of
// the fifo, sid-0 MSGs to the POLL at the head, other MSGs to their
// subscription. One per transport; it never blocks on anything but the socket.
// The answers among the frames of one read are settled together (settle.go).
func (c *Conn) readLoop(t *transport) {
	defer c.wg.Done()
	var b answerBatch
	for {
		f, err := t.fr.next()
		for err == nil && f != nil {
			if derr := c.route(t, f, &b); derr != nil {
				c.dropConn(t, derr)
				return
			}
			f, err = t.fr.buffered()
		}
		// the answers that came are settled before anything else happens
		// to the fifo: a lost connection would replay confirmed publishes
		if serr := c.settle(t, &b); serr != nil {
			c.dropConn(t, serr)
			return
		}
		if err != nil {
			c.lost(t, fmt.Errorf("fibril: read: %w", err))
			return
		}
	}
}

func (c *Conn) dropConn(t *transport, err error) {
	c.cfg.logger.Error("fibril: dropping connection", "err", err)
	c.lost(t, err)
}

// route handles one frame: an answer joins b (settled when b is full, or
// before any other frame, or when the read's frames are used up), anything
// else is handled now.
func (c *Conn) route(t *transport, f *frame, b *answerBatch) error {
	switch f.kind {
	case fOK, fPong:
	case fErr:
		if pe := protocol.ParseErrText([]byte(f.arg)); pe.Fatal() && connectionLevel(pe.Code) {
			// not an answer: the server is about to close (shutting down,
			// stale, slow); unanswered publishes are replayed after the
			// reconnect instead of failing
			if err := c.settle(t, b); err != nil {
				return err
			}
			c.cfg.logger.Warn("fibril: server closes the connection", "err", pe)
			return fmt.Errorf("fibril: server: %w", pe)
		}
	case fMsg, fBadMsg:
		if f.sidOK && f.sid == 0 {
			// for the POLL at the head once the answers before it are
			// settled: it joins b, in order
			m, bad := c.newMsg(t.fr, f)
			if b.addDelivery(m, bad) {
				return c.settle(t, b)
			}
			return nil
		}
		if err := c.settle(t, b); err != nil {
			return err
		}
		return c.dispatch(t, f)
	default:
		if err := c.settle(t, b); err != nil {
			return err
		}
		return c.dispatch(t, f)
	}
	// +OK, -ERR, PONG: the answer to the oldest request not yet answered
	if b.add(f) {
		return c.settle(t, b)
	}
	return nil
}

// dispatch handles a frame that is not an answer.
func (c *Conn) dispatch(t *transport, f *frame) error {
	switch f.kind {
	case fPing:
		c.mu.Lock()
		if c.tr == t {
			t.pingsOut = 0
			c.writeLocked(t, []byte("PONG\r\n"))
		}
		c.mu.Unlock()
		return nil
	case fInfo:
		info, err := protocol.ParseInfo([]byte(f.arg))
		if err != nil {
			return fmt.Errorf("%w: INFO: %w", ErrProtocol, err)
		}
		t.fr.setMaxPayload(int(info.MaxPayload))
		c.mu.Lock()
		if c.tr != t {
			c.mu.Unlock()
			return nil
		}
		logAfter := c.setInfoLocked(info)
		c.mu.Unlock()
		logAfter()
		return nil
	case fMsg, fBadMsg:
		return c.deliver(t, f)
	}
	return fmt.Errorf("%w: unexpected frame %v", ErrProtocol, f.kind)
}

// connectionLevel reports whether a fatal error code is about the
// connection as a whole rather than an answer to the oldest command.
func connectionLevel(code protocol.Code) bool {
	switch code {
	case protocol.CodeShuttingDown, protocol.CodeStaleConnection, protocol.CodeSlowConsumer,
		protocol.CodeMaxConnections, protocol.CodeAuthTimeout:
		return true
	}
	return false
}

// deliver turns a MSG/HMSG into a *Msg and hands it to the POLL at the head
// of the fifo (sid 0) or to its subscription. A delivery the parser refused
// (checksum mismatch, bad header block) never yields data: it becomes a
// *CorruptError and is nacked so that the server redelivers it.
func (c *Conn) deliver(t *transport, f *frame) error {
	if !f.sidOK {
		return fmt.Errorf("%w: delivery with a sid this client never uses", ErrProtocol)
	}
	sid := f.sid
	m, bad := c.newMsg(t.fr, f)
	c.mu.Lock()
	if c.tr != t {
		c.mu.Unlock()
		return nil
	}
	t.pingsOut = 0
	if sid == 0 {
		if len(c.fifo) == 0 || c.fifo[0].kind != reqPoll {
			c.mu.Unlock()
			return fmt.Errorf("%w: sid 0 delivery with no POLL pending", ErrProtocol)
		}
		r := c.fifo[0]
		if bad != nil {
			r.corrupt = append(r.corrupt, bad)
		} else {
			r.msgs = append(r.msgs, m)
		}
		c.mu.Unlock()
		if bad != nil {
			c.releaseAsync(m)
		}
		return nil
	}
	s := c.subs[sid]
	c.mu.Unlock()
	switch {
	case s == nil:
		// a late delivery for a stopped subscription: give it back
		c.releaseAsync(m)
	case bad != nil:
		s.push(nil, bad)
		c.releaseAsync(m)
	default:
		s.push(m, nil)
	}
	return nil
}

// newMsg makes the Msg of a delivery, taken from the read loop's slab (fr
// belongs to the calling read loop).
func (c *Conn) newMsg(fr *frameReader, f *frame) (*Msg, error) {
	m := fr.slab.msg()
	m.Subject, m.handle, m.conn = f.subject, f.reply, c
	if h, err := protocol.ParseHandle(f.reply); err == nil {
		m.h, m.hok = h, true
	}
	if f.kind == fBadMsg {
		ce := &CorruptError{Subject: f.subject, Handle: string(f.reply), Cause: f.bad}
		return m, ce
	}
	if c.cfg.crc && !f.hasCRC {
		return m, &CorruptError{Subject: f.subject, Handle: string(f.reply), Cause: fmt.Errorf("%w: delivery without a checksum", ErrProtocol)}
	}
	if len(f.hdr) > 0 {
		m.Header = parseHeader(f.hdr)
	}
	m.Data, m.CRC = f.data, f.crc
	return m, nil
}

// releaseAsync nacks a delivery nobody will process (corrupt, or its
// consumer went away) so that the server redelivers it now instead of after
// its lease. It never blocks the caller.
func (c *Conn) releaseAsync(m *Msg) {
	if m == nil || !m.hok {
		return
	}
	r := newRequest(reqOK, protocol.AppendNack(nil, m.h, 0))
	if err := c.send(r); err != nil {
		return
	}
	go func() {
		if err := c.wait(context.Background(), r); err != nil {
			c.cfg.logger.Debug("fibril: release failed", "handle", m.Handle(), "err", err)
		}
	}()
}

// parseOKPosition parses the argument of a publish confirm.
func parseOKPosition(arg []byte) (Position, error) {
	p, stored, err := protocol.ParseConfirm(arg)
	if err != nil {
		return Position{}, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	return Position{Partition: int(p.Partition), Seq: p.Seq, Stored: stored, Duplicate: p.Duplicate}, nil
}
