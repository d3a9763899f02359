package server

// SPEC.md "PUB/HPUB": validation, permissions, the reserved `$` space, ack
// handles as subjects, then durable capture (confirm after durability) and
// plain fan-out.

import (
	"strconv"
	"strings"
)

var okNone = []byte("+OK -\r\n")

// handlePub routes one PUB/HPUB. m's slices are borrowed until it returns.
// crcGiven says whether the frame carried a checksum (crc mode, not `-`).
func (c *client) handlePub(m *pubMsg, crcGiven bool) {
	if !validSubject(m.subject) || (m.reply != "" && !validSubject(m.reply)) {
		c.reject(errBadSubject, "invalid subject "+strconv.Quote(m.subject))
		return
	}
	if crcGiven {
		want := m.crc
		m.crcSet = false
		if m.sum() != want {
			c.reject(errCRC, "payload checksum does not match")
			return
		}
	}
	if strings.HasPrefix(m.subject, "$") {
		if strings.HasPrefix(m.subject, "$F.") {
			c.settleByPub(m)
			return
		}
		c.reject(errReserved, "the $ subject space is reserved")
		return
	}
	if !c.canPublish(m.subject) {
		c.reject(errPermPub, "may not publish to "+strconv.Quote(m.subject))
		return
	}
	if c.srv.durable != nil && c.publishDurable(m) {
		return
	}
	c.fanOut(m)
	if c.confirming() {
		c.answerNow(okNone)
		return
	}
	c.ok()
}
