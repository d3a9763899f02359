package protocol

import (
	"bytes"
	"hash/crc32"

	"github.com/fibrilmq/fibril/wire"
)

// jsConsumerCreate is the JetStream request subject that may hold a filter.
var jsConsumerCreate = []byte("$JS.API.CONSUMER.CREATE.")

// This file implements SPEC.md "PUB", "HPUB", "MSG", "HMSG" and "Checksums":
// the frames that carry a body. Their control line fixes where the frame
// ends, so an error on it is fatal; errors found once the whole frame is in
// are not.

// headerPrefix starts every header block.
const headerPrefix = wire.HeaderPrefix

// parseSized parses PUB, HPUB, MSG and HMSG. b starts at the frame, eol is
// the index of the control line's LF, args the line after the verb.
func (p *Parser) parseSized(b []byte, eol int, args []byte, op Op) (int, error) {
	n := p.split(args)
	hasHdr := op == OpHPub || op == OpHMsg
	hasSid := op == OpMsg || op == OpHMsg
	fixed := 2 // subject, size
	if hasHdr {
		fixed++
	}
	if hasSid {
		fixed++
	}
	if p.crc {
		fixed++
	}
	if n != fixed && n != fixed+1 {
		return 0, &Error{Code: CodeBadFrame, Detail: op.String() + " has " + itoa(n) + " arguments, want " + itoa(fixed) + " or " + itoa(fixed+1)}
	}
	a := p.args[:n]
	c := &p.cmd
	c.Op = op
	c.Subject = a[0]
	i := 1
	if hasSid {
		c.Sid = a[i]
		i++
	}
	if n == fixed+1 {
		c.Reply = a[i]
		i++
	}
	hdr := uint64(0)
	if hasHdr {
		v, st := parseUint(a[i], maxUint64)
		if st == numInvalid {
			p.cmd = Command{}
			return 0, &Error{Code: CodeBadFrame, Detail: "header size " + quoteDetail(a[i])}
		}
		if st == numOverflow {
			v = maxUint64
		}
		hdr = v
		i++
	}
	total, st := parseUint(a[i], uint64(p.lim.MaxPayload))
	switch st {
	case numInvalid:
		p.cmd = Command{}
		return 0, &Error{Code: CodeBadFrame, Detail: "size " + quoteDetail(a[i])}
	case numOverflow:
		p.cmd = Command{}
		return 0, &Error{Code: CodeMaxPayload, Detail: "size " + quoteDetail(a[i]) + ", limit " + itoa(p.lim.MaxPayload)}
	}
	if hdr > total {
		p.cmd = Command{}
		return 0, &Error{Code: CodeBadFrame, Detail: "header size larger than total size"}
	}
	i++
	var crcTok []byte
	if p.crc {
		crcTok = a[i]
	}

	start := eol + 1
	end := start + int(total)
	if len(b) < end+1 {
		p.pending = end + 1 // at least the body and a bare LF
		p.cmd = Command{}
		return 0, nil
	}
	next := end + 1
	switch b[end] {
	case '\n':
	case '\r':
		if len(b) < end+2 {
			p.pending = end + 2
			p.cmd = Command{}
			return 0, nil
		}
		if b[end+1] != '\n' {
			p.cmd = Command{}
			return 0, &Error{Code: CodeBadFrame, Detail: "payload not followed by CRLF"}
		}
		next = end + 2
	default:
		p.cmd = Command{}
		return 0, &Error{Code: CodeBadFrame, Detail: "payload not followed by CRLF"}
	}
	body := b[start:end]
	c.Header = body[:hdr]
	c.Payload = body[hdr:]
	// A header size of 0 is a frame without headers, as in NATS (nats.js
	// sends `HPUB s 0 n` for an empty header set); it is routed as PUB.
	if err := p.checkSized(body, crcTok, hasHdr && hdr > 0); err != nil {
		p.cmd = Command{}
		return next, err
	}
	return next, nil
}

// checkSized runs the non-fatal checks of a delimited frame, in the order
// SPEC.md gives: subject, reply-to, sid, checksum token, checksum, header.
func (p *Parser) checkSized(body, crcTok []byte, hasHdr bool) *Error {
	c := &p.cmd
	// JetStream names a consumer's filter in the request subject
	// (`$JS.API.CONSUMER.CREATE.<stream>.<consumer>.<filter>`), wildcards
	// included (SPEC.md 16.2).
	wild := bytes.HasPrefix(c.Subject, jsConsumerCreate)
	if code := checkSubject(c.Subject, wild); code != "" {
		return &Error{Code: code, Detail: "subject " + quoteDetail(c.Subject)}
	}
	if c.Reply != nil {
		if code := checkSubject(c.Reply, false); code != "" {
			return &Error{Code: code, Detail: "reply-to " + quoteDetail(c.Reply)}
		}
	}
	if c.Sid != nil && !validToken(c.Sid) {
		return &Error{Code: CodeInvalidArgs, Detail: "sid " + quoteDetail(c.Sid)}
	}
	if p.crc {
		want, given := uint32(0), false
		if len(crcTok) == 1 && crcTok[0] == '-' && p.dir == ClientToServer {
			given = false
		} else if v, ok := parseHex8(crcTok); ok {
			want, given = v, true
		} else {
			return &Error{Code: CodeInvalidCRCToken, Detail: quoteDetail(crcTok)}
		}
		c.CRC = crc32.ChecksumIEEE(body)
		c.HasCRC = given
		if given && c.CRC != want {
			return &Error{Code: CodeCRCMismatch, Detail: "got " + string(appendHex8(nil, want)) + ", computed " + string(appendHex8(nil, c.CRC))}
		}
	}
	if hasHdr && !validHeaderBlock(c.Header) {
		return &Error{Code: CodeInvalidHeader, Detail: quoteDetail(c.Header)}
	}
	return nil
}

// validHeaderBlock reports whether h starts with "NATS/1.0" (then a space or
// CRLF) and ends with an empty line.
func validHeaderBlock(h []byte) bool { return wire.ValidHeader(h) }

// split tokenizes args into p.args and returns the token count (which may
// exceed len(p.args); extra tokens are counted, not kept). One pass, no calls:
// it runs for every PUB and MSG.
func (p *Parser) split(args []byte) int {
	n, start := 0, -1
	for i, c := range args {
		if c == ' ' || c == '\t' {
			if start >= 0 {
				if n < len(p.args) {
					p.args[n] = args[start:i]
				}
				n++
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		if n < len(p.args) {
			p.args[n] = args[start:]
		}
		n++
	}
	return n
}

// itoa formats n for error details (error path only).
func itoa(n int) string {
	if n < 0 {
		return "-" + string(wire.AppendUint(nil, uint64(-n)))
	}
	return string(wire.AppendUint(nil, uint64(n)))
}
