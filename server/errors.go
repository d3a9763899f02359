package server

// Error answers (SPEC.md "Errors"): fibril clients get
// -ERR '<code> <text>[: <detail>]', other clients NATS's own text where it
// has one. The table (codes, texts, which close the connection) is
// protocol/errors.json; this file only picks the form per connection.

import (
	"errors"

	"github.com/fibrilmq/fibril/protocol"
)

// errStop is returned by the parse handler to stop parsing the rest of the
// buffer (the connection is closing).
var errStop = errors.New("server: stop parsing")

// errLine encodes code+detail for this connection. detail is human text; it
// must never contain a secret.
func (c *client) errLine(code protocol.Code, detail string) []byte {
	return protocol.AppendError(nil, protocol.NewError(code, detail), c.modes.strict.Load())
}

// fatal reports whether code closes this connection.
func (c *client) fatal(code protocol.Code) bool {
	spec := code.Spec()
	if c.modes.strict.Load() {
		return spec.Fatal
	}
	return spec.NATSFatal
}

// fail sends code and closes the connection, whatever the table says. Safe
// from any goroutine.
func (c *client) fail(code protocol.Code, detail string) {
	c.log.Info("closing connection", "code", string(code), "detail", detail)
	c.closeWith(string(code), c.errLine(code, detail))
}

// reject answers the current command with code (in answer order); a code
// that is fatal in this connection's mode also closes it. Input goroutine
// only.
func (c *client) reject(code protocol.Code, detail string) {
	if c.fatal(code) {
		c.fail(code, detail)
		return
	}
	c.answerNow(c.errLine(code, detail))
}
