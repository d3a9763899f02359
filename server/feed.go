package server

// Input path: bytes from the transport → frames → handlers. TEMPORARY
// minimal frame splitter until package protocol lands; it will be replaced
// by protocol's parser with the same handler calls.

import (
	"bytes"
	"fmt"
	"strconv"
	"time"
)

// feed parses the whole frames at the start of buf (borrowed: nothing may
// keep it after return) and returns how many bytes it consumed. Partial
// frames are left for the next call. Input goroutine only.
func (c *client) feed(buf []byte) int {
	c.sawInput(time.Now().UnixNano())
	pos := 0
	for pos < len(buf) && !c.isClosing() {
		rest := buf[pos:]
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			if len(rest) > c.srv.opts.MaxControlLine {
				c.fail(errMaxControl, fmt.Sprintf("control line over %d bytes", c.srv.opts.MaxControlLine))
			}
			return pos
		}
		line := rest[:nl]
		if nl > c.srv.opts.MaxControlLine {
			c.fail(errMaxControl, fmt.Sprintf("control line over %d bytes", c.srv.opts.MaxControlLine))
			return pos
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		var args [8][]byte
		fields := splitArgs(line, args[:0])
		if len(fields) == 0 {
			pos += nl + 1
			continue
		}
		verb := string(bytes.ToUpper(fields[0]))
		frameLen := nl + 1
		var body []byte
		if verb == "PUB" || verb == "HPUB" {
			size, ok := c.pubSize(verb, fields)
			if !ok {
				return pos
			}
			if len(rest) < frameLen+size+2 {
				return pos
			}
			body = rest[frameLen : frameLen+size]
			if rest[frameLen+size] != '\r' || rest[frameLen+size+1] != '\n' {
				c.fail(errParse, "payload not followed by CRLF")
				return pos
			}
			frameLen += size + 2
		}
		if !c.admitFrame(verb, frameLen) {
			return pos
		}
		c.dispatch(verb, line, fields, body)
		pos += frameLen
	}
	return pos
}

// admitFrame applies the pre-authentication caps: until authenticated only
// CONNECT and PING are accepted, within PreAuthBytes.
func (c *client) admitFrame(verb string, n int) bool {
	if c.authed.Load() {
		return true
	}
	c.preAuthUsed += n
	if c.preAuthUsed > c.srv.opts.PreAuthBytes {
		c.fail(errAuthViolation, "too much input before authentication")
		return false
	}
	if verb != "CONNECT" && verb != "PING" && verb != "PONG" {
		c.fail(errAuthViolation, "authenticate first")
		return false
	}
	return true
}

func (c *client) pubSize(verb string, f [][]byte) (int, bool) {
	n := len(f) - 1
	if c.crcOut.Load() {
		n--
	}
	var tok []byte
	switch {
	case verb == "PUB" && (n == 2 || n == 3):
		tok = f[n]
	case verb == "HPUB" && (n == 3 || n == 4):
		tok = f[n]
	default:
		c.fail(errParse, verb+": wrong number of arguments")
		return 0, false
	}
	size, err := strconv.Atoi(string(tok))
	if err != nil || size < 0 {
		c.fail(errParse, verb+": bad size")
		return 0, false
	}
	if size > c.srv.opts.MaxPayload {
		c.fail(errMaxPayload, fmt.Sprintf("%d bytes over max_payload %d", size, c.srv.opts.MaxPayload))
		return 0, false
	}
	return size, true
}

func splitArgs(line []byte, out [][]byte) [][]byte {
	i := 0
	for i < len(line) {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		start := i
		for i < len(line) && line[i] != ' ' && line[i] != '\t' {
			i++
		}
		if i > start {
			out = append(out, line[start:i])
		}
	}
	return out
}

func (c *client) dispatch(verb string, line []byte, f [][]byte, body []byte) {
	switch verb {
	case "PING":
		c.handlePing()
	case "PONG":
		c.handlePong()
	case "CONNECT":
		js := bytes.TrimSpace(line[len("CONNECT"):])
		c.handleConnect(js)
	case "PUB", "HPUB":
		c.tmpPub(verb, f, body)
	case "SUB":
		switch len(f) {
		case 3:
			c.handleSub(string(f[1]), "", string(f[2]), 0)
		case 4:
			c.handleSub(string(f[1]), string(f[2]), string(f[3]), 0)
		default:
			c.reject(errBadArgs, "SUB: wrong number of arguments")
		}
	case "UNSUB":
		var max uint64
		if len(f) == 3 {
			v, err := strconv.ParseUint(string(f[2]), 10, 64)
			if err != nil {
				c.reject(errBadArgs, "UNSUB: bad max")
				return
			}
			max = v
		}
		if len(f) < 2 || len(f) > 3 {
			c.reject(errBadArgs, "UNSUB: wrong number of arguments")
			return
		}
		c.handleUnsub(string(f[1]), max)
	default:
		c.fail(errUnknownOp, "unknown verb "+strconv.Quote(verb))
	}
}

func (c *client) tmpPub(verb string, f [][]byte, body []byte) {
	args := f[1:]
	var crcTok []byte
	if c.crcOut.Load() {
		crcTok = args[len(args)-1]
		args = args[:len(args)-1]
	}
	m := pubMsg{subject: string(args[0]), body: body}
	nsize := 1
	if verb == "HPUB" {
		nsize = 2
	}
	if len(args)-1 > nsize {
		m.reply = string(args[1])
	}
	if verb == "HPUB" {
		h, err := strconv.Atoi(string(args[len(args)-2]))
		if err != nil || h < 0 || h > len(body) {
			c.reject(errBadArgs, "HPUB: bad header size")
			return
		}
		m.hdrLen = h
	}
	given := false
	if crcTok != nil && string(crcTok) != "-" {
		v, err := strconv.ParseUint(string(crcTok), 16, 32)
		if err != nil || len(crcTok) != 8 {
			c.reject(errBadArgs, "bad crc token")
			return
		}
		m.crc, given = uint32(v), true
	}
	c.handlePub(&m, given)
}

// setParserCRC switches CRC-token parsing for the frames after CONNECT.
func (c *client) setParserCRC(bool) {}
