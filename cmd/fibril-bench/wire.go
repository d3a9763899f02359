package main

// A minimal Fibril wire client built directly on the protocol package (no
// SDK): the benchmark measures the server, so the client side does as little
// as a careful client can — no allocation per message, one buffered writer,
// one reader goroutine per connection, pipelined requests.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// errServer wraps an -ERR text the server sent where the benchmark cannot go on.
var errServer = errors.New("server error")

// wconn is one client connection.
type wconn struct {
	nc   net.Conn
	wmu  sync.Mutex // guards w: the run loop and the reader (PONG) both write
	w    *bufio.Writer
	p    *protocol.Parser
	rbuf []byte
	info protocol.Info
	crc  bool
}

// connMode says how a connection introduces itself in CONNECT.
type connMode struct {
	fibril  bool // "fibril":1: strict answers, confirms, Fibril verbs
	crc     bool // "crc":true: checksum token on PUB and MSG
	confirm bool // "confirm":true without fibril
}

// dialWire connects, reads INFO, sends CONNECT and PING and waits for PONG.
func dialWire(ctx context.Context, addr string, m connMode) (*wconn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c := &wconn{nc: nc, w: bufio.NewWriterSize(nc, 64<<10), rbuf: make([]byte, 0, 256<<10),
		p: protocol.NewParser(protocol.ServerToClient, protocol.Limits{})}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	} else {
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	}
	defer func() { _ = nc.SetDeadline(time.Time{}) }()
	var gotInfo, gotPong bool
	var herr error
	h := protocol.HandlerFunc(func(cmd *protocol.Command) error {
		switch cmd.Op {
		case protocol.OpInfo:
			if !gotInfo {
				info, err := protocol.ParseInfo(cmd.JSON)
				if err != nil {
					herr = fmt.Errorf("INFO: %w", err)
					return herr
				}
				c.info, gotInfo = info, true
			}
		case protocol.OpPong:
			gotPong = true
		case protocol.OpErr:
			herr = fmt.Errorf("%w: CONNECT answered -ERR '%s'", errServer, cmd.Text)
			return herr
		}
		return nil
	})
	if err := c.readUntil(h, func() bool { return gotInfo }); err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: waiting for INFO: %w", addr, err)
	}
	if m.crc && !c.info.CRC {
		nc.Close()
		return nil, fmt.Errorf("%s: server does not offer crc mode", addr)
	}
	cn := protocol.Connect{Name: "fibril-bench", Lang: "go", Headers: true, Protocol: 1, CRC: m.crc, Confirm: m.confirm}
	if m.fibril {
		cn.Fibril = 1
	}
	b, err := protocol.AppendConnect(nil, &cn)
	if err != nil {
		nc.Close()
		return nil, err
	}
	b = protocol.AppendPing(b)
	if _, err := nc.Write(b); err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: CONNECT: %w", addr, err)
	}
	c.crc = m.crc
	c.p.SetCRC(m.crc)
	c.p.SetLimits(protocol.Limits{MaxPayload: int(c.info.MaxPayload)})
	if err := c.readUntil(h, func() bool { return gotPong }); err != nil {
		nc.Close()
		if herr != nil {
			err = herr
		}
		return nil, fmt.Errorf("%s: waiting for PONG after CONNECT: %w", addr, err)
	}
	return c, nil
}

// readUntil reads and parses frames until done() holds after a Parse call.
// Frames after the one that made done() true stay buffered for the next call.
func (c *wconn) readUntil(h protocol.Handler, done func() bool) error {
	for {
		if len(c.rbuf) > 0 {
			n, err := c.p.Parse(c.rbuf, h)
			c.rbuf = c.rbuf[:copy(c.rbuf, c.rbuf[n:])]
			if err != nil {
				return err
			}
			if done() {
				return nil
			}
		}
		if err := c.fill(); err != nil {
			return err
		}
	}
}

// fill reads more bytes into rbuf, growing it for a large pending frame.
func (c *wconn) fill() error {
	if need := c.p.Pending(); need > cap(c.rbuf) {
		nb := make([]byte, len(c.rbuf), need+4096)
		copy(nb, c.rbuf)
		c.rbuf = nb
	} else if len(c.rbuf) == cap(c.rbuf) {
		nb := make([]byte, len(c.rbuf), 2*cap(c.rbuf))
		copy(nb, c.rbuf)
		c.rbuf = nb
	}
	n, err := c.nc.Read(c.rbuf[len(c.rbuf):cap(c.rbuf)])
	c.rbuf = c.rbuf[:len(c.rbuf)+n]
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// serve parses frames until the connection fails or h returns an error.
// After each Parse that left no partial frame, idle is called (a place to
// flush batched acks before blocking in Read). Non-fatal parser errors (a
// bad checksum on one MSG) go to onBad and parsing continues.
func (c *wconn) serve(h protocol.Handler, idle func() error, onBad func(error)) error {
	for {
		for len(c.rbuf) > 0 {
			n, err := c.p.Parse(c.rbuf, h)
			c.rbuf = c.rbuf[:copy(c.rbuf, c.rbuf[n:])]
			if err == nil {
				break
			}
			var pe *protocol.Error
			if errors.As(err, &pe) && !pe.Fatal() && n > 0 {
				onBad(err)
				continue
			}
			return err
		}
		if idle != nil {
			if err := idle(); err != nil {
				return err
			}
		}
		if err := c.fill(); err != nil {
			return err
		}
	}
}

// write appends b to the buffered writer.
func (c *wconn) write(b []byte) error {
	c.wmu.Lock()
	_, err := c.w.Write(b)
	c.wmu.Unlock()
	return err
}

// flush sends what is buffered.
func (c *wconn) flush() error {
	c.wmu.Lock()
	err := c.w.Flush()
	c.wmu.Unlock()
	return err
}

// writeFlush writes b and flushes.
func (c *wconn) writeFlush(b []byte) error {
	c.wmu.Lock()
	_, err := c.w.Write(b)
	if err == nil {
		err = c.w.Flush()
	}
	c.wmu.Unlock()
	return err
}

// pong answers a server PING.
func (c *wconn) pong() error { return c.writeFlush([]byte("PONG\r\n")) }

// close closes the socket (unblocks the reader).
func (c *wconn) close() { _ = c.nc.Close() }

// request sends one Fibril command and returns the text of its +OK answer
// (a management call, before the run starts: nothing else is in flight).
func (c *wconn) request(frame []byte) (string, error) {
	if err := c.writeFlush(frame); err != nil {
		return "", err
	}
	var text string
	var done bool
	var rerr error
	h := protocol.HandlerFunc(func(cmd *protocol.Command) error {
		switch cmd.Op {
		case protocol.OpOK:
			text, done = string(cmd.Text), true
		case protocol.OpErr:
			rerr, done = &replyError{text: string(cmd.Text), pe: protocol.ParseErrText(cmd.Text)}, true
		case protocol.OpPing:
			return c.pong()
		}
		if done {
			return errStop
		}
		return nil
	})
	err := c.readUntil(h, func() bool { return done })
	if errors.Is(err, errStop) {
		err = nil
	}
	if err != nil {
		return "", err
	}
	return text, rerr
}

// replyError is an -ERR answer to a request: errServer, and the answer's
// code as a *protocol.Error.
type replyError struct {
	text string
	pe   *protocol.Error
}

func (e *replyError) Error() string   { return fmt.Sprintf("%v: '%s'", errServer, e.text) }
func (e *replyError) Unwrap() []error { return []error{errServer, e.pe} }

// errStop ends a Parse early once the awaited answer arrived.
var errStop = errors.New("stop")

// attemptOf returns the delivery count, the last token of an ack handle
// ($F.<topic>.<group>.<partition>.<seq>.<attempt>); 1 when absent.
func attemptOf(handle []byte) int {
	n, mul := 0, 1
	for i := len(handle) - 1; i >= 0; i-- {
		ch := handle[i]
		if ch == '.' {
			break
		}
		if ch < '0' || ch > '9' {
			return 1
		}
		n += int(ch-'0') * mul
		mul *= 10
	}
	if n == 0 {
		return 1
	}
	return n
}
