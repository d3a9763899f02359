package server

// Error answers (SPEC.md "Errors"): fibril clients get
// -ERR '<code> <text>', other clients NATS's own text where it has one.

import (
	"strings"
)

// wireErr is one row of the error table as the server uses it.
type wireErr struct {
	code  string // stable snake_case code
	nats  string // NATS text for non-fibril clients
	fatal bool   // the connection is closed after it
}

var (
	errUnknownOp     = wireErr{"unknown_operation", "Unknown Protocol Operation", true}
	errParse         = wireErr{"parse_error", "Parser Error", true}
	errMaxPayload    = wireErr{"max_payload", "Maximum Payload Violation", true}
	errMaxControl    = wireErr{"max_control_line", "Maximum Control Line Exceeded", true}
	errAuthViolation = wireErr{"authorization_violation", "Authorization Violation", true}
	errAuthTimeout   = wireErr{"authentication_timeout", "Authentication Timeout", true}
	errStale         = wireErr{"stale_connection", "Stale Connection", true}
	errSlowConsumer  = wireErr{"slow_consumer", "Slow Consumer", true}
	errInputOverflow = wireErr{"input_overflow", "Maximum Pending Input Exceeded", true}
	errMaxSubs       = wireErr{"max_subscriptions", "Maximum Subscriptions Exceeded", false}
	errBadSubject    = wireErr{"invalid_subject", "Invalid Subject", false}
	errPermPub       = wireErr{"permission_denied", "Permissions Violation for Publish", false}
	errPermSub       = wireErr{"permission_denied", "Permissions Violation for Subscription", false}
	errCRC           = wireErr{"crc_mismatch", "payload checksum does not match", false}
	errBadArgs       = wireErr{"invalid_arguments", "Invalid Arguments", false}
	errBadConnect    = wireErr{"invalid_connect", "Invalid Connect", true}
	errNoHeaders     = wireErr{"headers_not_enabled", "Headers Not Enabled", false}
	errWindowFull    = wireErr{"window_full", "Unconfirmed Publish Window Exceeded", false}
	errUnavailable   = wireErr{"durable_unavailable", "Durable Engine Unavailable", false}
	errQueueFull     = wireErr{"queue_full", "Queue Full", false}
	errReserved      = wireErr{"reserved_subject", "Reserved Subject", false}
	errInternal      = wireErr{"internal_error", "Internal Error", false}
	errNotFound      = wireErr{"not_found", "Not Found", false}
	errStaleHandle   = wireErr{"stale_handle", "Stale Handle", false}
	errUnknownHandle = wireErr{"unknown_handle", "Unknown Handle", false}
	errExists        = wireErr{"already_exists", "Already Exists", false}
)

// errLine encodes e for this connection. detail is human text; it must
// never contain a secret.
func (c *client) errLine(e wireErr, detail string) []byte {
	var b strings.Builder
	b.WriteString("-ERR '")
	if c.strict.Load() {
		b.WriteString(e.code)
		if detail == "" {
			detail = strings.ToLower(e.nats)
		}
		b.WriteByte(' ')
		b.WriteString(sanitize(detail))
	} else {
		b.WriteString(e.nats)
	}
	b.WriteString("'\r\n")
	return []byte(b.String())
}

// sanitize keeps an error text on one line and free of quotes.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '\'', '\r', '\n':
			return ' '
		}
		return r
	}, s)
}

// fail sends e and closes the connection (whatever e.fatal says). Safe
// from any goroutine.
func (c *client) fail(e wireErr, detail string) {
	c.log.Info("closing connection", "code", e.code, "detail", detail)
	c.closeWith(e.code, c.errLine(e, detail))
}

// reject answers the current command with e; a fatal e also closes the
// connection. Input goroutine only.
func (c *client) reject(e wireErr, detail string) {
	if e.fatal {
		c.fail(e, detail)
		return
	}
	c.answerNow(c.errLine(e, detail))
}
