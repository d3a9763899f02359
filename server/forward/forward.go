// Package forward carries commands a cluster node does not serve to the
// node that does, over Fibril's own client protocol on that node's
// client port (SPEC.md 11.2): one connection per target node and user,
// authenticated by the token the target announced in the cluster's
// metadata group and running as the user who sent the commands, so the
// target applies that user's permissions and binds leases to them.
//
// # What it owns
//
//   - The pool of forwarding connections: at most Options.MaxConns, one
//     per (target, user), dialled on first use, dropped when they fail
//     (the next command dials again).
//   - Each connection's pipeline: commands written in the order Send
//     took them, answers (+OK / -ERR lines, in command order: the target
//     connection is in Fibril mode) handed to each command's done in the
//     same order; PINGs answered.
//
// # What it must never do
//
//   - Block its caller (a network event loop): a command that finds no
//     room (Options.Window unanswered on its connection) or no
//     connection slot is refused at once with ErrBusy; dialling happens
//     off the caller.
//   - Lose a done: every command's done is called once, with its answer
//     or with ErrLost (the connection failed: the outcome is unknown).
//   - Read a line longer than Options.MaxLine.
package forward

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// errClosed ends a connection its owner closed (CloseTag, Close): not
// reported.
var errClosed = errors.New("forwarding connection closed")

// Errors of forwarding; both are retriable.
var (
	// ErrBusy: no room for the command (window or connections full).
	ErrBusy = errors.New("forward: too many forwarded commands waiting")
	// ErrLost: the forwarding connection failed before the answer came:
	// the command may or may not have been carried out.
	ErrLost = errors.New("forward: connection to the serving node lost, outcome unknown")
)

// Target is the node a command goes to.
type Target struct {
	Node, Addr, Token string
}

// Options tune a Pool. Zero fields take the defaults.
type Options struct {
	// MaxConns bounds the open connections (default 256).
	MaxConns int
	// Window bounds a connection's unanswered commands (default 1024).
	Window int
	// DialTimeout bounds dialling and the handshake (default 2 s).
	DialTimeout time.Duration
	// MaxLine bounds an answer line (default 1 MiB).
	MaxLine int
	// MaxAnswer bounds the bytes of the deliveries one answer carries
	// (a forwarded POLL's; default 32 MiB); past it the connection is
	// cut.
	MaxAnswer int
	// Name is the connections' CONNECT name (the forwarding node's).
	Name string
	// Logf reports connection failures.
	Logf func(format string, args ...any)
}

// Done receives a command's answer line (without its line end) and the
// deliveries (MSG/HMSG frames) that came before it, or an error. It runs
// on the connection's reader goroutine: it must be quick.
type Done func(answer []byte, msgs []Msg, err error)

// Msg is one delivery frame: of an answer (a forwarded POLL's), or
// pushed to a durable SUB (Subscribe).
type Msg struct {
	Subject, Reply string
	Header, Data   []byte
	sid            string
}

// Pool is a node's forwarding connections. Safe for concurrent use.
type Pool struct {
	o      Options
	mu     sync.Mutex
	conns  map[key]*conn
	closed bool
}

type key struct {
	node, addr, token, user, tag string
	plain                        bool // CONNECT fibril_plain
}

// New returns an empty pool.
func New(o Options) *Pool {
	if o.MaxConns <= 0 {
		o.MaxConns = 256
	}
	if o.Window <= 0 {
		o.Window = 1024
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 2 * time.Second
	}
	if o.MaxLine <= 0 {
		o.MaxLine = 1 << 20
	}
	if o.MaxAnswer <= 0 {
		o.MaxAnswer = 32 << 20
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return &Pool{o: o, conns: map[key]*conn{}}
}

// Send forwards cmd (one whole command, its line and body with their
// line ends) to t as user, on the connection tagged tag ("" is the shared
// one; a tag of its own keeps a waiting POLL from holding back other
// commands' answers, and CloseTag ends it); done gets its answer. cmd is
// copied.
func (p *Pool) Send(t Target, user, tag string, cmd []byte, done Done) {
	p.send(t, user, tag, cmd, nil, done)
}

// SendPlain is Send on a plain-only connection (CONNECT fibril_plain):
// the target delivers what it carries to its plain subscribers only.
func (p *Pool) SendPlain(t Target, user, tag string, cmd []byte, done Done) {
	p.sendOn(t, user, tag, true, cmd, nil, done)
}

// SubscribePlain is Subscribe on a plain-only connection.
func (p *Pool) SubscribePlain(t Target, user, tag string, cmd []byte, onPush func(Msg), done Done) {
	p.sendOn(t, user, tag, true, cmd, onPush, done)
}

// Has reports whether a connection to t for user and tag is open (or
// opening): false once it failed, so its owner knows what it held there
// is gone.
func (p *Pool) Has(t Target, user, tag string, plain bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.conns[key{t.Node, t.Addr, t.Token, user, tag, plain}]
	return ok
}

// Subscribe is Send for a durable SUB: onPush gets each delivery the
// target pushes for it (frames whose sid is not POLL's "0"), on the
// connection's reader goroutine, until the connection ends (CloseTag, a
// failure: then done has been called, and onPush is called no more). The
// connection should be tagged for this subscription alone.
func (p *Pool) Subscribe(t Target, user, tag string, cmd []byte, onPush func(Msg), done Done) {
	p.send(t, user, tag, cmd, onPush, done)
}

func (p *Pool) send(t Target, user, tag string, cmd []byte, onPush func(Msg), done Done) {
	p.sendOn(t, user, tag, false, cmd, onPush, done)
}

func (p *Pool) sendOn(t Target, user, tag string, plain bool, cmd []byte, onPush func(Msg), done Done) {
	k := key{t.Node, t.Addr, t.Token, user, tag, plain}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		done(nil, nil, ErrLost)
		return
	}
	c := p.conns[k]
	if c == nil {
		if len(p.conns) >= p.o.MaxConns {
			p.mu.Unlock()
			done(nil, nil, fmt.Errorf("%w: %d forwarding connections open", ErrBusy, p.o.MaxConns))
			return
		}
		c = p.newConn(k)
		p.conns[k] = c
	}
	p.mu.Unlock()
	if onPush != nil {
		c.mu.Lock()
		c.onPush = onPush
		c.mu.Unlock()
	}
	c.send(cmd, done)
}

// Close fails every waiting command with ErrLost and closes the
// connections.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[key]*conn{}
	p.mu.Unlock()
	for _, c := range conns {
		c.fail(errClosed)
	}
}

// CloseTag closes the connections tagged tag or tag + "/..." (the client
// they forwarded for is gone: the leases they hold on the target end with
// them).
func (p *Pool) CloseTag(tag string) {
	if tag == "" {
		return
	}
	p.mu.Lock()
	var cs []*conn
	for k, c := range p.conns {
		if k.tag == tag || strings.HasPrefix(k.tag, tag+"/") {
			cs = append(cs, c)
			delete(p.conns, k)
		}
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.fail(errClosed)
	}
}

// drop forgets c (it failed).
func (p *Pool) drop(c *conn) {
	p.mu.Lock()
	if p.conns[c.k] == c {
		delete(p.conns, c.k)
	}
	p.mu.Unlock()
}

// conn is one forwarding connection.
type conn struct {
	p *Pool
	k key

	mu      sync.Mutex
	cond    *sync.Cond // signalled when out grows or the conn fails
	out     [][]byte   // commands not yet written
	pending []Done     // commands written or queued, oldest first
	onPush  func(Msg)  // a durable SUB's deliveries (Subscribe)
	err     error      // set once: the conn failed
	nc      net.Conn
}

func (p *Pool) newConn(k key) *conn {
	c := &conn{p: p, k: k}
	c.cond = sync.NewCond(&c.mu)
	go c.run()
	return c
}

// send queues cmd unless the window is full or the conn failed.
func (c *conn) send(cmd []byte, done Done) {
	c.mu.Lock()
	if err := c.err; err != nil {
		c.mu.Unlock()
		done(nil, nil, fmt.Errorf("%w: %v", ErrLost, err))
		return
	}
	if len(c.pending) >= c.p.o.Window {
		c.mu.Unlock()
		done(nil, nil, fmt.Errorf("%w: %d commands unanswered on the connection to %s", ErrBusy, c.p.o.Window, c.k.node))
		return
	}
	c.pending = append(c.pending, done)
	c.out = append(c.out, bytes.Clone(cmd))
	c.cond.Signal()
	c.mu.Unlock()
}

// fail ends the conn: every waiting command gets ErrLost.
func (c *conn) fail(why error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = why
	pending := c.pending
	c.pending, c.out = nil, nil
	nc := c.nc
	c.cond.Broadcast()
	c.mu.Unlock()
	if nc != nil {
		nc.Close()
	}
	c.p.drop(c)
	if why != errClosed {
		c.p.o.Logf("forwarding to %s (%s): %v", c.k.node, c.k.addr, why)
	}
	for _, d := range pending {
		d(nil, nil, fmt.Errorf("%w: %v", ErrLost, why))
	}
}

// run dials, then writes what send queues while read takes the answers.
func (c *conn) run() {
	nc, r, err := c.dial()
	if err != nil {
		c.fail(err)
		return
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		nc.Close()
		return
	}
	c.nc = nc
	c.mu.Unlock()
	go c.read(r)
	w := bufio.NewWriterSize(nc, 64<<10)
	for {
		c.mu.Lock()
		for len(c.out) == 0 && c.err == nil {
			c.cond.Wait()
		}
		if c.err != nil {
			c.mu.Unlock()
			return
		}
		out := c.out
		c.out = nil
		c.mu.Unlock()
		for _, b := range out {
			w.Write(b)
		}
		if err := w.Flush(); err != nil {
			c.fail(fmt.Errorf("write: %w", err))
			return
		}
	}
}

// dial connects and authenticates: INFO, CONNECT, PING, then PONG.
func (c *conn) dial() (net.Conn, *bufio.Reader, error) {
	nc, err := net.DialTimeout("tcp", c.k.addr, c.p.o.DialTimeout)
	if err != nil {
		return nil, nil, err
	}
	nc.SetDeadline(time.Now().Add(c.p.o.DialTimeout))
	r := bufio.NewReaderSize(nc, 64<<10)
	line, err := c.line(r)
	if err != nil || !bytes.HasPrefix(line, []byte("INFO ")) {
		nc.Close()
		return nil, nil, fmt.Errorf("handshake: no INFO (%q, %v)", line, err)
	}
	js, _ := json.Marshal(protocol.Connect{Fibril: 1, Headers: true, Confirm: true, Name: c.p.o.Name, Lang: "fibril-forward",
		Forward: c.k.token, As: c.k.user, Plain: c.k.plain})
	if _, err := fmt.Fprintf(nc, "CONNECT %s\r\nPING\r\n", js); err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("handshake: %w", err)
	}
	for {
		line, err := c.line(r)
		if err != nil {
			nc.Close()
			return nil, nil, fmt.Errorf("handshake: %w", err)
		}
		if bytes.Equal(line, []byte("PONG")) {
			break
		}
		if bytes.HasPrefix(line, []byte("-ERR")) {
			nc.Close()
			return nil, nil, fmt.Errorf("handshake refused: %s", line)
		}
	}
	nc.SetDeadline(time.Time{})
	return nc, r, nil
}

// frame reads the body of the delivery whose line is line: "MSG
// <subject> <sid> [reply] <#bytes>" or "HMSG <subject> <sid> [reply]
// <#header> <#total>" (the connection is not in CRC mode: no token).
func (c *conn) frame(r *bufio.Reader, line []byte) (Msg, error) {
	f := strings.Fields(string(line))
	hdrLen, total, reply := 0, 0, ""
	var err error
	switch {
	case f[0] == "MSG" && (len(f) == 4 || len(f) == 5):
		if len(f) == 5 {
			reply = f[3]
		}
		total, err = strconv.Atoi(f[len(f)-1])
	case f[0] == "HMSG" && (len(f) == 5 || len(f) == 6):
		if len(f) == 6 {
			reply = f[3]
		}
		if hdrLen, err = strconv.Atoi(f[len(f)-2]); err == nil {
			total, err = strconv.Atoi(f[len(f)-1])
		}
	default:
		return Msg{}, fmt.Errorf("delivery line %q", line)
	}
	if err != nil || hdrLen < 0 || total < hdrLen || total > c.p.o.MaxAnswer {
		return Msg{}, fmt.Errorf("delivery line %q: bad sizes", line)
	}
	body := make([]byte, total+2)
	if _, err := io.ReadFull(r, body); err != nil {
		return Msg{}, err
	}
	if !bytes.HasSuffix(body, []byte("\r\n")) {
		return Msg{}, fmt.Errorf("delivery %q: body not ended by CRLF", line)
	}
	m := Msg{Subject: f[1], Reply: reply, Data: body[hdrLen:total], sid: f[2]}
	if hdrLen > 0 {
		m.Header = body[:hdrLen]
	}
	return m, nil
}

// line reads one line without its end, at most MaxLine bytes.
func (c *conn) line(r *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		frag, err := r.ReadSlice('\n')
		out = append(out, frag...)
		if len(out) > c.p.o.MaxLine {
			return nil, fmt.Errorf("answer line over %d bytes", c.p.o.MaxLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return nil, err
		}
		return bytes.TrimRight(out, "\r\n"), nil
	}
}

// read hands each answer, with the deliveries before it, to the oldest
// waiting command.
func (c *conn) read(r *bufio.Reader) {
	var msgs []Msg
	size := 0
	for {
		line, err := c.line(r)
		if err != nil {
			c.fail(fmt.Errorf("read: %w", err))
			return
		}
		switch {
		case bytes.Equal(line, []byte("PING")):
			c.mu.Lock()
			if c.err == nil {
				c.out = append(c.out, []byte("PONG\r\n"))
				c.cond.Signal()
			}
			c.mu.Unlock()
		case bytes.HasPrefix(line, []byte("+OK")) || bytes.HasPrefix(line, []byte("-ERR")):
			c.mu.Lock()
			if len(c.pending) == 0 {
				c.mu.Unlock()
				c.fail(fmt.Errorf("an answer %q with no command waiting", line))
				return
			}
			d := c.pending[0]
			c.pending[0] = nil
			c.pending = c.pending[1:]
			c.mu.Unlock()
			d(line, msgs, nil)
			msgs, size = nil, 0
		case bytes.HasPrefix(line, []byte("MSG ")) || bytes.HasPrefix(line, []byte("HMSG ")):
			m, err := c.frame(r, line)
			if err == nil {
				size += len(m.Subject) + len(m.Header) + len(m.Data)
				if size > c.p.o.MaxAnswer {
					err = fmt.Errorf("an answer's deliveries over %d bytes", c.p.o.MaxAnswer)
				}
			}
			if err != nil {
				c.fail(err)
				return
			}
			c.mu.Lock()
			push := c.onPush
			c.mu.Unlock()
			if push != nil && m.sid != "0" {
				push(m)
				continue
			}
			msgs = append(msgs, m)
		case bytes.Equal(line, []byte("PONG")), bytes.HasPrefix(line, []byte("INFO ")):
		default:
			c.fail(fmt.Errorf("unexpected line %q", line))
			return
		}
	}
}
