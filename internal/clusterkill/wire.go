package clusterkill

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// readTimeout bounds the wait for one frame: a node that answers nothing
// for this long is treated as gone (the operations in flight on it are
// recorded as unknown).
const readTimeout = 10 * time.Second

// conn is one raw Fibril protocol connection. next is called from one
// goroutine (the reader); write may be called from another.
type conn struct {
	nc   net.Conn
	p    *protocol.Parser
	buf  []byte
	tmp  []byte
	cmds []protocol.Command // parsed, copied frames not yet taken
}

// dial connects to addr, reads INFO and logs in as a Fibril client.
func dial(addr string) (*conn, error) {
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc, p: protocol.NewParser(protocol.ServerToClient, protocol.Limits{}), tmp: make([]byte, 64<<10)}
	if f, err := c.next(); err != nil || f.Op != protocol.OpInfo {
		nc.Close()
		return nil, fmt.Errorf("clusterkill: %s: no INFO (%v, %v)", addr, f.Op, err)
	}
	if err := c.write([]byte("CONNECT {\"fibril\":1}\r\n")); err != nil {
		nc.Close()
		return nil, err
	}
	if f, err := c.next(); err != nil || f.Op != protocol.OpOK {
		nc.Close()
		return nil, fmt.Errorf("clusterkill: %s: CONNECT answered %v %q (%v)", addr, f.Op, f.Text, err)
	}
	return c, nil
}

func (c *conn) close() { _ = c.nc.Close() }

func (c *conn) write(b []byte) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(readTimeout))
	_, err := c.nc.Write(b)
	return err
}

// next returns the next frame, copied, reading as needed; it fails when
// no frame comes within readTimeout.
func (c *conn) next() (protocol.Command, error) {
	for len(c.cmds) == 0 {
		n, err := c.p.Parse(c.buf, protocol.HandlerFunc(func(cmd *protocol.Command) error {
			cp := *cmd
			cp.Subject = append([]byte(nil), cmd.Subject...)
			cp.Reply = append([]byte(nil), cmd.Reply...)
			cp.Header = append([]byte(nil), cmd.Header...)
			cp.Payload = append([]byte(nil), cmd.Payload...)
			cp.Text = append([]byte(nil), cmd.Text...)
			cp.Sid, cp.JSON, cp.Handles = nil, nil, nil
			c.cmds = append(c.cmds, cp)
			return nil
		}))
		c.buf = c.buf[n:]
		if err != nil {
			return protocol.Command{}, fmt.Errorf("clusterkill: parsing: %w", err)
		}
		if len(c.cmds) > 0 {
			break
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(readTimeout))
		m, err := c.nc.Read(c.tmp)
		c.buf = append(c.buf, c.tmp[:m]...)
		if err != nil && m == 0 {
			return protocol.Command{}, err
		}
	}
	f := c.cmds[0]
	c.cmds = c.cmds[1:]
	return f, nil
}

// errAnswer is a -ERR answer (the connection is fine).
type errAnswer struct{ text string }

func (e *errAnswer) Error() string { return "-ERR " + e.text }

// isAnswer reports whether err is a -ERR answer rather than a broken
// connection.
func isAnswer(err error) bool {
	var e *errAnswer
	return errors.As(err, &e)
}

// request sends line and returns the +OK text, an *errAnswer for -ERR, or
// the connection's error. For setup commands only (no pipelining).
func (c *conn) request(line string) (string, error) {
	if err := c.write([]byte(line + "\r\n")); err != nil {
		return "", err
	}
	for {
		f, err := c.next()
		if err != nil {
			return "", err
		}
		switch f.Op {
		case protocol.OpOK:
			return string(f.Text), nil
		case protocol.OpErr:
			return "", &errAnswer{string(f.Text)}
		case protocol.OpPing:
			_ = c.write([]byte("PONG\r\n"))
		}
	}
}
