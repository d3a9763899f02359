package tui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// ErrProtocol is wrapped by errors for answers the client did not expect.
var ErrProtocol = errors.New("tui: unexpected answer")

// frame is an owned copy of one parsed server frame.
type frame struct {
	op      protocol.Op
	text    []byte // +OK argument, -ERR text, INFO JSON
	reply   []byte // MSG/HMSG reply-to (the ack handle)
	subject []byte
}

// client is a fibril-mode connection with strict answers: every command
// gets exactly one answer, in order, so a request is "write, read one".
// Its methods are safe for concurrent use (one request at a time).
type client struct {
	mu      sync.Mutex
	nc      net.Conn
	p       *protocol.Parser
	buf     []byte
	off     int
	queue   []frame
	info    protocol.Info
	timeout time.Duration
	out     []byte
}

// dialTarget splits a server URL ("nats://[user:pass@|token@]host:port",
// "fibril://…" or "host:port") into an address and credentials.
func dialTarget(raw string) (addr string, cn protocol.Connect, err error) {
	if !strings.Contains(raw, "://") {
		raw = "nats://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", cn, fmt.Errorf("tui: bad server URL %q: %w", raw, err)
	}
	if u.Host == "" {
		return "", cn, fmt.Errorf("tui: bad server URL %q: no host", raw)
	}
	addr = u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "4222")
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", cn, fmt.Errorf("tui: bad server URL %q: %w", raw, err)
	}
	if u.User != nil {
		if pass, ok := u.User.Password(); ok {
			cn.User, cn.Pass = u.User.Username(), pass
		} else {
			cn.AuthToken = u.User.Username()
		}
	}
	return addr, cn, nil
}

// dial connects, reads INFO and sends CONNECT with fibril 1.
func dial(target string, cn protocol.Connect, timeout time.Duration) (*client, error) {
	addr, fromURL, err := dialTarget(target)
	if err != nil {
		return nil, err
	}
	if cn.AuthToken == "" && cn.User == "" {
		cn.AuthToken, cn.User, cn.Pass = fromURL.AuthToken, fromURL.User, fromURL.Pass
	}
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("tui: dial %s: %w", addr, err)
	}
	return newClient(nc, cn, timeout)
}

// newClient runs the handshake on nc (read INFO, send CONNECT, read +OK);
// it closes nc when the handshake fails.
func newClient(nc net.Conn, cn protocol.Connect, timeout time.Duration) (*client, error) {
	c := &client{nc: nc, p: protocol.NewParser(protocol.ServerToClient, protocol.Limits{}), buf: make([]byte, 0, 64<<10), timeout: timeout}
	f, err := c.next()
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("tui: read INFO: %w", err)
	}
	if f.op != protocol.OpInfo {
		nc.Close()
		return nil, fmt.Errorf("%w: first frame is %s, not INFO", ErrProtocol, f.op)
	}
	if c.info, err = protocol.ParseInfo(f.text); err != nil {
		nc.Close()
		return nil, fmt.Errorf("tui: INFO: %w", err)
	}
	if c.info.Fibril < 1 {
		nc.Close()
		return nil, fmt.Errorf("%w: server does not speak fibril (plain NATS?)", ErrProtocol)
	}
	cn.Fibril, cn.Name, cn.Lang, cn.Headers = 1, "fibril-tui", "go", true
	line, err := protocol.AppendConnect(nil, &cn)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("tui: CONNECT: %w", err)
	}
	if _, err := c.request(line); err != nil {
		nc.Close()
		return nil, fmt.Errorf("tui: CONNECT: %w", err)
	}
	return c, nil
}

func (c *client) close() error { return c.nc.Close() }

// next returns the next frame that is not a server PING (answered here) or
// an INFO update after the first.
func (c *client) next() (frame, error) {
	for {
		for len(c.queue) == 0 {
			n, err := c.p.Parse(c.buf[c.off:], protocol.HandlerFunc(func(cmd *protocol.Command) error {
				f := frame{op: cmd.Op}
				switch cmd.Op {
				case protocol.OpInfo:
					f.text = append([]byte(nil), cmd.JSON...)
				case protocol.OpOK, protocol.OpErr:
					f.text = append([]byte(nil), cmd.Text...)
				case protocol.OpMsg, protocol.OpHMsg:
					f.reply = append([]byte(nil), cmd.Reply...)
					f.subject = append([]byte(nil), cmd.Subject...)
				}
				c.queue = append(c.queue, f)
				return nil
			}))
			c.off += n
			if err != nil {
				return frame{}, fmt.Errorf("tui: parse: %w", err)
			}
			if len(c.queue) > 0 {
				break
			}
			if c.off > 0 { // keep only the partial frame, at the front
				c.buf = append(c.buf[:0], c.buf[c.off:]...)
				c.off = 0
			}
			if len(c.buf) == cap(c.buf) {
				c.buf = slices.Grow(c.buf, cap(c.buf))
			}
			_ = c.nc.SetReadDeadline(time.Now().Add(c.timeout))
			m, err := c.nc.Read(c.buf[len(c.buf):cap(c.buf)])
			c.buf = c.buf[:len(c.buf)+m]
			if err != nil && m == 0 {
				return frame{}, fmt.Errorf("tui: read: %w", err)
			}
		}
		f := c.queue[0]
		c.queue = c.queue[1:]
		switch {
		case f.op == protocol.OpPing:
			if err := c.write(protocol.AppendPong(nil)); err != nil {
				return frame{}, err
			}
		case f.op == protocol.OpInfo && c.info.ServerID != "":
			// An INFO update: nothing here depends on it.
		default:
			return f, nil
		}
	}
}

func (c *client) write(b []byte) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.timeout))
	if _, err := c.nc.Write(b); err != nil {
		return fmt.Errorf("tui: write: %w", err)
	}
	return nil
}

// answer reads one answer: the +OK text, or the -ERR as an error.
func (c *client) answer() ([]byte, error) {
	f, err := c.next()
	if err != nil {
		return nil, err
	}
	switch f.op {
	case protocol.OpOK:
		return f.text, nil
	case protocol.OpErr:
		return nil, protocol.ParseErrText(f.text)
	}
	return nil, fmt.Errorf("%w: %s", ErrProtocol, f.op)
}

// request sends one command and reads its answer; the caller holds no lock.
func (c *client) request(line []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.write(line); err != nil {
		return nil, err
	}
	return c.answer()
}

func (c *client) requestJSON(line []byte, v any) error {
	text, err := c.request(line)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(text, v); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrProtocol, text, err)
	}
	return nil
}

func (c *client) topicList() ([]string, error) {
	var l protocol.TopicList
	err := c.requestJSON(protocol.AppendTopicList(nil), &l)
	return l.Topics, err
}

func (c *client) topicInfo(name string) (protocol.TopicInfo, error) {
	var in protocol.TopicInfo
	err := c.requestJSON(protocol.AppendTopicInfo(nil, name), &in)
	return in, err
}

func (c *client) groupInfo(topic, group string) (protocol.GroupInfo, error) {
	var in protocol.GroupInfo
	err := c.requestJSON(protocol.AppendGroupInfo(nil, topic, group), &in)
	return in, err
}

func (c *client) groupCreate(topic, group string) error {
	var in protocol.GroupInfo
	return c.requestJSON(protocol.AppendGroupCreate(nil, topic, group, nil), &in)
}

// publish sends n confirmed messages to subject, pipelined within the
// server's max_unconfirmed window, and returns how many were stored.
func (c *client) publish(subject string, n int, payload func(i int) []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	window := c.info.MaxUnconfirmed
	if window <= 0 || window > 256 {
		window = 256
	}
	stored := 0
	for i := 0; i < n; {
		k := min(window, n-i)
		c.out = c.out[:0]
		for j := range k {
			c.out = protocol.AppendPub(c.out, subject, "", payload(i+j), protocol.NoCRC)
		}
		if err := c.write(c.out); err != nil {
			return stored, err
		}
		var firstErr error
		for range k {
			text, err := c.answer()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			if _, ok, err := protocol.ParseConfirm(text); err == nil && ok {
				stored++
			}
		}
		if firstErr != nil {
			return stored, firstErr
		}
		i += k
	}
	return stored, nil
}

// consume polls up to max messages of topic/group and acks them all in one
// ACK; it returns how many were acked.
func (c *client) consume(topic, group string, max int) (int, error) {
	hs, err := c.poll(topic, group, max)
	if err != nil {
		return 0, err
	}
	if err := c.ack(hs); err != nil {
		return 0, err
	}
	return len(hs), nil
}

// poll leases up to max ready messages of topic/group without waiting and
// returns their handles. It reads the whole answer (the deliveries and the
// final +OK) even when a delivery is malformed, so later answers stay
// aligned with their requests.
func (c *client) poll(topic, group string, max int) ([]protocol.Handle, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.write(protocol.AppendPoll(nil, topic, group, max, 0)); err != nil {
		return nil, err
	}
	var hs []protocol.Handle
	var bad error
	for {
		f, err := c.next()
		if err != nil {
			return nil, err
		}
		switch f.op {
		case protocol.OpMsg, protocol.OpHMsg:
			h, err := protocol.ParseHandle(f.reply)
			if err != nil && bad == nil {
				bad = fmt.Errorf("%w: delivery handle %q: %w", ErrProtocol, f.reply, err)
			}
			if err == nil {
				hs = append(hs, h)
			}
			continue
		case protocol.OpErr:
			return nil, protocol.ParseErrText(f.text)
		case protocol.OpOK:
			if _, err := protocol.ParsePollDone(f.text); err != nil {
				return nil, fmt.Errorf("%w: poll end %q: %w", ErrProtocol, f.text, err)
			}
			return hs, bad
		default:
			return nil, fmt.Errorf("%w: %s while polling", ErrProtocol, f.op)
		}
	}
}

// ack acknowledges hs in one ACK command (none: no command).
func (c *client) ack(hs []protocol.Handle) error {
	if len(hs) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.write(protocol.AppendAck(nil, hs...)); err != nil {
		return err
	}
	_, err := c.answer()
	return err
}
