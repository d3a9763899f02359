package server

// SPEC.md "CONNECT" and "PING/PONG": connection options, authentication,
// connection modes (plain NATS, confirm, crc, fibril strict answers).

import (
	"errors"
	"strconv"
	"sync/atomic"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/access"
)

// connModes is what CONNECT set. The input goroutine writes it; the
// atomics are read from any goroutine once set (before any delivery can be
// routed to this client, since subscriptions come later).
type connModes struct {
	opts                       protocol.Connect // input goroutine; credentials cleared
	fixed                      bool             // input goroutine: a CONNECT set the modes (a second one must not change them)
	echo                       bool             // input goroutine
	crcOut, headersOut, strict atomic.Bool
}

// connLogin is who authenticated and a password check's answer.
type connLogin struct {
	perms       *access.Identity // input goroutine: who authenticated (never nil once ready)
	user        string           // input goroutine: the user name authenticated ("" for a token, no auth)
	forwarded   bool             // input goroutine: a cluster node forwarding as user (SPEC.md 11.2): never forwards on
	plainOnly   bool             // input goroutine: a forwarded connection carrying another node's publishes to plain subscribers only
	preAuthUsed int              // input goroutine: bytes parsed before authentication
	pending     *authResult      // under client.mu: a finished off-loop check (state auth_checked)
	// lowat is the socket's pre-auth read threshold, lowatOff to
	// lowatRescue (conn_gnet.go, "Pre-auth reads"): any goroutine.
	lowat atomic.Int32
}

var (
	okLine   = []byte("+OK\r\n")
	pongLine = []byte("PONG\r\n")
)

// errPause stops parsing until an off-loop step (a bcrypt check) is done;
// the rest of the input stays buffered.
var errPause = errors.New("server: parsing paused")

// authResult is a finished off-loop authentication.
type authResult struct {
	o     protocol.Connect
	perms *access.Identity
	user  string
	ok    bool
	busy  bool // shed from the check queue: not checked
}

// handleConnect applies a CONNECT whose JSON is js (borrowed). A password
// check costs tens of milliseconds of CPU, so it goes to the server's
// bounded check queue (authqueue.go): handleConnect then returns errPause
// and the owner resumes with resumeConnect once the result is in (a TLS
// reader, which may block, waits for it here).
func (c *client) handleConnect(js []byte) error {
	o, err := protocol.ParseConnect(js)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			c.fail(pe.Code, pe.Detail)
		} else {
			c.fail(protocol.CodeInvalidConnect, "")
		}
		return errStop
	}
	if c.isReady() {
		if o.Forward != "" && !c.login.forwarded {
			// A node forwarding to a server without auth (ready at once):
			// its token still decides that it is one (SPEC.md 11.2).
			perms, user, ok := c.srv.authenticateForward(&o)
			if !ok {
				c.log.Warn("forwarding node refused: bad token")
				c.fail(protocol.CodeAuthViolation, "bad credentials")
				return errStop
			}
			c.login.perms, c.login.user, c.login.forwarded, c.login.plainOnly = perms, user, true, o.Plain
		}
		c.applyConnect(o)
		return nil
	}
	if o.Forward != "" {
		// A cluster node forwarding (SPEC.md 11.2): a token compare, no
		// password check.
		perms, user, ok := c.srv.authenticateForward(&o)
		c.finishAuth(authResult{o: o, perms: perms, user: user, ok: ok})
		return c.stopIfClosing()
	}
	if o.User != "" && len(c.srv.opts.Users) > 0 {
		// A password verified (or refused) a moment ago is answered at
		// once, without a check (passwords.go).
		if perms, ok, hit := c.srv.creds.lookup(o.User, o.Pass); hit {
			if ok {
				c.srv.auth.trust(sourceOf(c.tr.remoteAddr()))
			}
			c.finishAuth(authResult{o: o, perms: perms, user: o.User, ok: ok})
			return c.stopIfClosing()
		}
		return c.queueCheck(o)
	}
	perms, user, ok := c.srv.authenticate(&o)
	c.finishAuth(authResult{o: o, perms: perms, user: user, ok: ok})
	return c.stopIfClosing()
}

// queueCheck hands a user/password CONNECT to the check queue. A CONNECT
// the queue sheds is answered auth_busy. Input goroutine only.
func (c *client) queueCheck(o protocol.Connect) error {
	if _, ok := c.state.to(stateAuthQueued); !ok {
		return errStop // closing meanwhile
	}
	var ch chan struct{}
	if c.tr.isTLS() {
		ch = make(chan struct{})
	}
	j := &authJob{o: o, src: sourceOf(c.tr.remoteAddr()), gone: c.isClosing, started: c.checkStarted, done: func(r authResult, checked bool) {
		if !checked {
			r = authResult{busy: true}
		}
		c.mu.Lock()
		c.login.pending = &r
		c.mu.Unlock()
		c.state.to(stateAuthChecked) // fails only when closing: then r is never applied
		if ch != nil {
			close(ch)
		} else {
			c.tr.wake()
		}
	}}
	if !c.srv.auth.submit(j) {
		c.fail(protocol.CodeAuthBusy, "max_auth_queue "+strconv.Itoa(c.srv.opts.MaxAuthQueue))
		return errStop
	}
	if ch == nil {
		return errPause
	}
	select {
	case <-ch:
	case <-c.ctx.Done():
		return errStop
	}
	if !c.resumeConnect() {
		return errStop
	}
	return nil
}

// resumeConnect applies a finished off-loop authentication; it reports
// whether parsing may go on. Input goroutine only.
func (c *client) resumeConnect() bool {
	switch c.state.load() {
	case stateAuthQueued, stateAuthChecking:
		return false // still checking
	case stateAuthChecked:
	default:
		return true
	}
	c.mu.Lock()
	r := c.login.pending
	c.mu.Unlock()
	if r == nil {
		return false // set before the state moved; never seen
	}
	// The state stays auth_checked until finishAuth moves it to ready or
	// closing, so the auth timeout holds off until then (a heartbeat in
	// between once answered a bad password with auth_timeout).
	c.finishAuth(*r)
	c.mu.Lock()
	c.login.pending = nil
	c.mu.Unlock()
	return !c.isClosing()
}

func (c *client) finishAuth(r authResult) {
	if r.busy {
		c.fail(protocol.CodeAuthBusy, "max_auth_queue "+strconv.Itoa(c.srv.opts.MaxAuthQueue))
		return
	}
	if !r.ok {
		// Never log the token or password; the user name is not secret.
		c.log.Warn("authentication failed", "user", r.user)
		c.fail(protocol.CodeAuthViolation, "bad credentials")
		return
	}
	c.login.perms, c.login.user, c.login.forwarded = r.perms, r.user, r.o.Forward != ""
	c.login.plainOnly = r.o.Forward != "" && r.o.Plain
	c.bindLeases()
	if _, ok := c.state.to(stateReady); !ok {
		return // closing meanwhile
	}
	c.setUser(r.user)
	if r.user != "" {
		c.log = c.log.With("user", r.user)
	}
	c.applyConnect(r.o)
}

// checkStarted is called by the check queue when this connection's
// password check starts being computed: from then the auth timeout waits
// for its answer.
func (c *client) checkStarted() { c.state.to(stateAuthChecking) }

// applyConnect sets the connection's modes from an accepted CONNECT.
func (c *client) applyConnect(o protocol.Connect) {
	o.AuthToken, o.Pass = "", ""
	if c.modes.fixed {
		// SPEC.md 3: a second CONNECT must not change the modes.
		o.Fibril, o.CRC, o.Confirm = c.modes.opts.Fibril, c.modes.opts.CRC, c.modes.opts.Confirm
	}
	c.modes.opts = o
	c.modes.fixed = true
	c.setMeta(o)
	c.modes.echo = o.EchoOn()
	c.modes.strict.Store(o.Fibril >= 1)
	c.modes.crcOut.Store(o.CRC)
	c.modes.headersOut.Store(o.Headers)
	c.setParserCRC(o.CRC)
	if o.Name != "" {
		c.log = c.log.With("name", o.Name)
	}
	c.ok()
}

// confirming reports whether PUB/HPUB get a confirm answer.
func (c *client) confirming() bool { return c.modes.opts.Confirms() }

// ok answers a successful command: +OK in strict or verbose mode, nothing
// otherwise.
func (c *client) ok() {
	if c.modes.opts.Fibril >= 1 || c.modes.opts.Verbose {
		c.answerNow(okLine)
	}
}

// handlePing answers PONG (in order behind outstanding answers).
func (c *client) handlePing() { c.answerNow(pongLine) }

// handlePong needs nothing beyond the liveness every input records.
func (c *client) handlePong() {}
