package server

// SPEC.md "PUB/HPUB": validation, permissions, the reserved `$` space
// (Fibril mode; plain subjects in NATS mode), ack handles as subjects, then
// durable capture (confirm after durability) and plain fan-out.

import (
	"strconv"
	"strings"

	"github.com/fibrilmq/fibril/protocol"
)

var okNone = []byte("+OK -\r\n")

// handlePub routes one PUB/HPUB that the parser validated (subject,
// reply-to, checksum, header block). m's slices are borrowed until it
// returns.
func (c *client) handlePub(m *pubMsg) {
	c.traffic.inMsgs.Add(1)
	c.srv.stats.inMsgs.Add(1)
	if c.login.plainOnly {
		// Another node's publish, for plain subscribers here
		// (forwarding.go): checked as its user, never stored.
		if err := c.login.perms.PublishPlain(m.subject); err != nil {
			c.reject(protocol.CodePermissionDenied, "for Publish to "+strconv.Quote(m.subject))
			return
		}
		c.publishPlain(m)
		return
	}
	if strings.HasPrefix(m.subject, "$") {
		if strings.HasPrefix(m.subject, protocol.HandlePrefix) {
			c.settleByPub(m)
			return
		}
		if c.modes.strict.Load() {
			c.reject(protocol.CodeReservedSubject, "to "+strconv.Quote(m.subject))
			return
		}
		if c.handleJS(m) {
			return // the JetStream API (handle_js.go)
		}
		// NATS mode: `$...` (other than ack handles) is a plain subject, as
		// on a NATS server without JetStream (handle_noresp.go).
		if err := c.login.perms.PublishPlain(m.subject); err != nil {
			c.reject(protocol.CodePermissionDenied, "for Publish to "+strconv.Quote(m.subject))
			return
		}
		c.publishPlain(m)
		return
	}
	if !c.canPublish(m.subject) {
		c.reject(protocol.CodePermissionDenied, "for Publish to "+strconv.Quote(m.subject))
		return
	}
	if c.srv.durable != nil {
		c.publishDurable(m)
		return
	}
	c.publishPlain(m)
}
