package server

// Input path (SPEC.md "Framing", "Limits", "Security"): bytes from the
// transport → protocol.Parser → the handlers of this package. The parser
// checks control-line and payload limits before waiting for a body, so the
// unparsed remainder a connection can hold stays under one maximal frame.

import (
	"errors"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// feed parses the whole frames at the start of buf (borrowed: nothing may
// keep it after return) and returns how many bytes it consumed. A partial
// frame is left for the next call. The subscribers its PUBs delivered to
// are woken once, when it returns (handle_plain.go, wakeLater). Input
// goroutine only.
func (c *client) feed(buf []byte) int {
	n := c.feedFrames(buf)
	c.countIn(n)
	c.wakeDeliveries()
	return n
}

// feedFrames is feed without the traffic count.
func (c *client) feedFrames(buf []byte) int {
	now := time.Now()
	c.sawInput(now.UnixNano())
	c.stage.begin(now)
	if !c.resumeConnect() || c.lane.stall.Load() || c.consumerStall() {
		return 0
	}
	pos := 0
	for pos < len(buf) && !c.isClosing() {
		view := buf[pos:]
		preAuth := !c.isReady()
		if preAuth {
			// Until authenticated, the parser only ever sees the budget.
			left := c.srv.opts.PreAuthBytes - c.login.preAuthUsed
			if left <= 0 {
				c.fail(protocol.CodeAuthViolation, "too much input before authentication")
				return pos
			}
			view = view[:min(len(view), left)]
		}
		n, err := c.parser.Parse(view, c)
		pos += n
		if preAuth {
			c.login.preAuthUsed += n
		}
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) {
				return pos // errStop (closing) or errPause (auth check running)
			}
			if !c.isReady() && !isConnectLine(view) {
				// Nothing before this frame was accepted, so it starts view.
				// SPEC.md 3: any command before CONNECT is an
				// authorization violation, whatever the parser found
				// wrong with it (a PUB announcing 2 GB is not answered
				// max_payload before the client has authenticated).
				c.fail(protocol.CodeAuthViolation, "authenticate first")
				return pos
			}
			if c.fatal(pe.Code) {
				c.fail(pe.Code, pe.Detail)
				return pos
			}
			c.answerNow(protocol.AppendError(nil, pe, c.modes.strict.Load()))
			continue
		}
		if preAuth && !c.isReady() {
			if c.login.preAuthUsed+len(buf)-pos > c.srv.opts.PreAuthBytes {
				c.fail(protocol.CodeAuthViolation, "too much input before authentication")
			}
			return pos
		}
		if preAuth {
			continue // authenticated mid-buffer: parse the rest unrestricted
		}
		return pos
	}
	return pos
}

// isConnectLine reports whether b starts with the verb CONNECT (any case),
// after optional spaces.
func isConnectLine(b []byte) bool {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	const verb = "CONNECT"
	if len(b) < len(verb) {
		return false
	}
	for i := 0; i < len(verb); i++ {
		if b[i]|0x20 != verb[i]|0x20 {
			return false
		}
	}
	return len(b) == len(verb) || b[len(verb)] == ' ' || b[len(verb)] == '\t' || b[len(verb)] == '\r' || b[len(verb)] == '\n'
}

// HandleCommand implements protocol.Handler: it dispatches one frame. cmd
// and its slices are borrowed until it returns.
func (c *client) HandleCommand(cmd *protocol.Command) error {
	// SPEC.md 3: with auth on, every command before an accepted CONNECT
	// is an authorization violation (as in NATS). A closing connection
	// serves nothing more (fail is then a no-op).
	if !c.isReady() && cmd.Op != protocol.OpConnect {
		c.fail(protocol.CodeAuthViolation, "authenticate first")
		return errStop
	}
	if cmd.Op.Fibril() && !c.modes.strict.Load() {
		c.reject(protocol.CodeFibrilRequired, cmd.Op.String())
		return c.stopIfClosing()
	}
	switch cmd.Op {
	case protocol.OpPing:
		c.handlePing()
	case protocol.OpPong:
		c.handlePong()
	case protocol.OpConnect:
		if err := c.handleConnect(cmd.JSON); err != nil {
			return err
		}
	case protocol.OpPub, protocol.OpHPub:
		m := pubMsg{subject: c.subjects.get(cmd.Subject), hdrLen: len(cmd.Header), body: frameBody(cmd)}
		if cmd.Reply != nil {
			m.reply = string(cmd.Reply)
		}
		if c.parser.CRC() {
			m.crc, m.crcSet = cmd.CRC, true
		}
		c.handlePub(&m)
	case protocol.OpSub:
		c.handleSub(string(cmd.Subject), string(cmd.Group), string(cmd.Sid), int(cmd.Max))
	case protocol.OpUnsub:
		c.handleUnsub(string(cmd.Sid), uint64(cmd.Max))
	default:
		c.handleDurable(cmd)
	}
	if err := c.stopIfClosing(); err != nil {
		return err
	}
	if c.lane.stall.Load() || c.stall.sub.Load() != nil {
		return errPause // the lane is full, or a subscriber is slow: parse the rest once it drains
	}
	return nil
}

func (c *client) stopIfClosing() error {
	if c.isClosing() {
		return errStop
	}
	return nil
}

// frameBody returns header block and payload as one slice. The parser hands
// them out as adjacent sub-slices of the input, so no copy is needed.
func frameBody(cmd *protocol.Command) []byte {
	h, p := cmd.Header, cmd.Payload
	if len(h) == 0 {
		return p
	}
	if len(p) == 0 {
		return h
	}
	if cap(h) >= len(h)+len(p) && &h[:len(h)+1][len(h)] == &p[0] {
		return h[:len(h)+len(p)]
	}
	return append(append(make([]byte, 0, len(h)+len(p)), h...), p...)
}

// subjectCache gives the subjects a connection publishes to as strings,
// making each string once: a publisher repeating a subject allocates
// nothing per message. It holds at most subjectCacheMax subjects and is
// emptied when full, so a publisher that never repeats one costs a map
// insert per message and the memory of subjectCacheMax subjects. Input
// goroutine only.
type subjectCache struct{ m map[string]string }

// subjectCacheMax bounds the subjects one connection's cache holds.
const subjectCacheMax = 64

// get returns b as a string (b is borrowed; the string is not).
func (sc *subjectCache) get(b []byte) string {
	if s, ok := sc.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if sc.m == nil {
		sc.m = make(map[string]string, subjectCacheMax)
	} else if len(sc.m) >= subjectCacheMax {
		clear(sc.m)
	}
	sc.m[s] = s
	return s
}

// setParserCRC switches CRC-token parsing for the frames after CONNECT.
func (c *client) setParserCRC(on bool) { c.parser.SetCRC(on) }
