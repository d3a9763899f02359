package server

// SPEC.md "CONNECT" and "PING/PONG": connection options, authentication,
// connection modes (plain NATS, confirm, crc, fibril strict answers).

import (
	"errors"

	"github.com/fibrilmq/fibril/protocol"
)

var (
	okLine   = []byte("+OK\r\n")
	pongLine = []byte("PONG\r\n")
)

// handleConnect applies a CONNECT whose JSON is js (borrowed).
func (c *client) handleConnect(js []byte) {
	o, err := protocol.ParseConnect(js)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			c.fail(pe.Code, pe.Detail)
		} else {
			c.fail(protocol.CodeInvalidConnect, "")
		}
		return
	}
	if !c.authed.Load() {
		perms, user, ok := c.srv.authenticate(&o)
		if !ok {
			// Never log the token or password; the user name is not secret.
			c.log.Warn("authentication failed", "user", user)
			c.fail(protocol.CodeAuthViolation, "bad credentials")
			return
		}
		c.perms = perms
		c.authed.Store(true)
		if user != "" {
			c.log = c.log.With("user", user)
		}
	}
	o.AuthToken, o.Pass = "", ""
	if c.connected {
		// SPEC.md 3: a second CONNECT must not change the modes.
		o.Fibril, o.CRC, o.Confirm = c.opts.Fibril, c.opts.CRC, c.opts.Confirm
	}
	c.opts = o
	c.connected = true
	c.echo = o.EchoOn()
	c.strict.Store(o.Fibril >= 1)
	c.crcOut.Store(o.CRC)
	c.headersOut.Store(o.Headers)
	c.setParserCRC(o.CRC)
	if o.Name != "" {
		c.log = c.log.With("name", o.Name)
	}
	c.ok()
}

// confirming reports whether PUB/HPUB get a confirm answer.
func (c *client) confirming() bool { return c.opts.Confirms() }

// ok answers a successful command: +OK in strict or verbose mode, nothing
// otherwise.
func (c *client) ok() {
	if c.opts.Fibril >= 1 || c.opts.Verbose {
		c.answerNow(okLine)
	}
}

// handlePing answers PONG (in order behind outstanding answers).
func (c *client) handlePing() { c.answerNow(pongLine) }

// handlePong needs nothing beyond the liveness every input records.
func (c *client) handlePong() {}
