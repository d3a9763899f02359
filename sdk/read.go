package fibril

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// readLoop decodes server frames on t and routes them: answers to the head of
// the fifo, sid-0 MSGs to the POLL at the head, other MSGs to their
// subscription. One per transport; it never blocks on anything but the socket.
func (c *Conn) readLoop(t *transport) {
	defer c.wg.Done()
	for {
		f, err := t.fr.next()
		if err != nil {
			c.lost(t, fmt.Errorf("fibril: read: %w", err))
			return
		}
		if err := c.dispatch(t, f); err != nil {
			c.cfg.logger.Error("fibril: dropping connection", "err", err)
			c.lost(t, err)
			return
		}
	}
}

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
		var info ServerInfo
		if err := json.Unmarshal([]byte(f.arg), &info); err != nil {
			return fmt.Errorf("%w: INFO json: %w", ErrProtocol, err)
		}
		info.Raw = json.RawMessage(f.arg)
		c.mu.Lock()
		c.info = info
		c.mu.Unlock()
		return nil
	case fMsg:
		return c.deliver(t, f)
	}
	// +OK, -ERR, PONG: the answer to the oldest request
	c.mu.Lock()
	if c.tr != t {
		c.mu.Unlock()
		return nil
	}
	t.pingsOut = 0
	if len(c.fifo) == 0 {
		c.mu.Unlock()
		if f.kind == fErr {
			se := newServerError(f.arg)
			c.cfg.logger.Warn("fibril: server error", "err", se)
			return nil // a fatal one is followed by the server closing
		}
		return fmt.Errorf("%w: answer with no request pending", ErrProtocol)
	}
	r := c.fifo[0]
	c.fifo[0] = nil
	c.fifo = c.fifo[1:]
	c.mu.Unlock()
	return c.answer(r, f)
}

// answer completes r with the answer frame f.
func (c *Conn) answer(r *request, f *frame) error {
	if f.kind == fErr {
		err := newServerError(f.arg)
		if r.kind == reqSub {
			c.cfg.logger.Error("fibril: re-subscribe refused", "err", err)
		}
		c.finish(r, err)
		return nil
	}
	switch r.kind {
	case reqPing:
		if f.kind != fPong {
			return fmt.Errorf("%w: PING answered by %v", ErrProtocol, f.kind)
		}
	default:
		if f.kind != fOK {
			return fmt.Errorf("%w: request answered by PONG", ErrProtocol)
		}
	}
	r.arg = f.arg
	c.finish(r, nil)
	return nil
}

// deliver turns a MSG/HMSG into a *Msg and hands it to the POLL at the head
// of the fifo (sid 0) or to its subscription. A CRC mismatch never yields
// data: it becomes a *CorruptError and the delivery is nacked.
func (c *Conn) deliver(t *transport, f *frame) error {
	m, bad := c.newMsg(f)
	c.mu.Lock()
	if c.tr != t {
		c.mu.Unlock()
		return nil
	}
	t.pingsOut = 0
	if f.sid == 0 {
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
	s := c.subs[f.sid]
	c.mu.Unlock()
	if s == nil {
		// a late delivery for a stopped subscription: give it back
		c.releaseAsync(m)
		return nil
	}
	if bad != nil {
		s.push(nil, bad)
		c.releaseAsync(m)
		return nil
	}
	s.push(m, nil)
	return nil
}

func (c *Conn) newMsg(f *frame) (*Msg, error) {
	m := &Msg{Subject: f.subject, Data: f.data, CRC: f.crc, handle: f.reply, conn: c}
	m.hinfo, m.hok = parseHandle(f.reply)
	if c.cfg.crc {
		if !f.hasCRC {
			return m, fmt.Errorf("%w: delivery without CRC token", ErrProtocol)
		}
		if got := crcOf(f.hdr, f.data); got != f.crc {
			return m, &CorruptError{Subject: f.subject, Handle: f.reply, Want: f.crc, Got: got}
		}
	}
	if len(f.hdr) > 0 {
		h, err := parseHeader(f.hdr)
		if err != nil {
			return m, err
		}
		m.Header = h
	}
	m.Data = f.data
	return m, nil
}

// releaseAsync nacks a delivery nobody will process (corrupt, or its
// consumer went away) so that the server redelivers it now instead of after
// its lease. It never blocks the caller.
func (c *Conn) releaseAsync(m *Msg) {
	if m == nil || !m.hok {
		return
	}
	r := newRequest(reqOK, []byte("NACK "+m.handle+"\r\n"))
	if err := c.send(r); err != nil {
		return
	}
	go func() {
		if err := c.wait(context.Background(), r); err != nil {
			c.cfg.logger.Debug("fibril: release failed", "handle", m.handle, "err", err)
		}
	}()
}

// newServerError parses the text of -ERR: "<code> <human text>". Codes come
// from SPEC.md's error table; an unknown code keeps its text.
func newServerError(text string) *Error {
	code, human, _ := strings.Cut(strings.TrimSpace(text), " ")
	if !isCode(code) {
		// not a fibril coded error (NATS text): keep it whole
		return &Error{Code: "unknown", Text: text}
	}
	e := &Error{Code: code, Text: human}
	if d, ok := errorTable[code]; ok {
		e.Fatal, e.Retriable = d.Fatal, d.Retriable
	}
	return e
}

func isCode(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// parseOKPosition parses the argument of a publish confirm.
func parseOKPosition(arg string) (Position, error) {
	if arg == "-" {
		return Position{}, nil
	}
	p, s, ok := strings.Cut(arg, ":")
	if !ok {
		return Position{}, fmt.Errorf("%w: confirm %q is not <partition>:<seq>", ErrProtocol, arg)
	}
	pn, err1 := strconv.ParseUint(p, 10, 32)
	sq, err2 := strconv.ParseUint(s, 10, 64)
	if err1 != nil || err2 != nil {
		return Position{}, fmt.Errorf("%w: confirm %q is not <partition>:<seq>", ErrProtocol, arg)
	}
	return Position{Partition: int(pn), Seq: sq, Stored: true}, nil
}
