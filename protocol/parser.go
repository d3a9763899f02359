package protocol

import "github.com/fibrilmq/fibril/wire"
import "bytes"

// Default limits (SPEC.md, "Limits").
const (
	// DefaultMaxControlLine is the longest control line, line end excluded.
	DefaultMaxControlLine = 4096
	// DefaultMaxJSONLine is the longest line that carries JSON (INFO,
	// CONNECT, TOPIC, GROUP, +OK), line end excluded: management answers
	// such as TOPIC LIST grow with the number of topics.
	DefaultMaxJSONLine = 1024 * 1024
	// DefaultMaxPayload is the largest PUB/HPUB/MSG/HMSG body (header block
	// plus payload), as NATS's default.
	DefaultMaxPayload = 1024 * 1024
)

// Limits bound what a Parser accepts. A zero field means its default.
type Limits struct {
	// MaxControlLine is the longest control line in bytes, line end
	// excluded (lines that carry JSON use MaxJSONLine instead).
	MaxControlLine int
	// MaxJSONLine is the longest INFO, CONNECT, TOPIC, GROUP or +OK line,
	// line end excluded.
	MaxJSONLine int
	// MaxPayload is the largest announced body size of PUB/HPUB/MSG/HMSG
	// (#bytes, or #total for HPUB/HMSG). A server uses its INFO max_payload;
	// a client uses the max_payload of the INFO it received.
	MaxPayload int
}

func (l Limits) withDefaults() Limits {
	if l.MaxControlLine <= 0 {
		l.MaxControlLine = DefaultMaxControlLine
	}
	if l.MaxJSONLine <= 0 {
		l.MaxJSONLine = DefaultMaxJSONLine
	}
	if l.MaxJSONLine < l.MaxControlLine {
		l.MaxJSONLine = l.MaxControlLine
	}
	if l.MaxPayload <= 0 {
		l.MaxPayload = DefaultMaxPayload
	}
	return l
}

// Handler receives the commands a Parser finds.
type Handler interface {
	// HandleCommand is called once per complete, valid frame, synchronously
	// inside Parse. c and every slice in it are borrowed: valid only until
	// HandleCommand returns. A non-nil error stops Parse after this frame;
	// Parse returns it unchanged, with consumed counting this frame.
	HandleCommand(c *Command) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(c *Command) error

// HandleCommand calls f(c).
func (f HandlerFunc) HandleCommand(c *Command) error { return f(c) }

// Parser is a streaming parser for one direction of one connection. It keeps
// no bytes between calls: Parse consumes whole frames and leaves a partial
// frame for the caller to pass again, with more bytes appended. A Parser is
// not safe for concurrent use; one connection owns it.
type Parser struct {
	dir     Direction
	crc     bool
	lim     Limits
	pending int
	cmd     Command
	args    [8][]byte
	handles []Handle
}

// NewParser returns a parser for frames travelling in direction dir, with CRC
// mode off. Zero fields of lim get their defaults.
func NewParser(dir Direction, lim Limits) *Parser {
	return &Parser{dir: dir, lim: lim.withDefaults()}
}

// Direction returns the direction the parser was made for.
func (p *Parser) Direction() Direction { return p.dir }

// SetCRC turns CRC mode on or off. With it on, PUB/HPUB/MSG/HMSG carry a
// final checksum token (SPEC.md, "Checksums"). The owner turns it on right
// after handling a CONNECT with "crc":true (server side) or after sending
// one (client side); calling it from inside the Handler affects the next
// frame of the same Parse call.
func (p *Parser) SetCRC(on bool) { p.crc = on }

// CRC reports whether CRC mode is on.
func (p *Parser) CRC() bool { return p.crc }

// Limits returns the limits in force (defaults filled in).
func (p *Parser) Limits() Limits { return p.lim }

// SetLimits replaces the limits; zero fields get their defaults. A client
// calls it with the max_payload of the INFO it received.
func (p *Parser) SetLimits(lim Limits) { p.lim = lim.withDefaults() }

// Pending returns, after Parse stopped at a partial frame whose size is
// already known from its control line, the fewest bytes that frame can still
// take in total (control line, body and a bare LF; CRLF needs one more), so
// the caller can grow its buffer once and need not call Parse again before
// that many bytes are buffered. It returns 0 otherwise.
func (p *Parser) Pending() int { return p.pending }

// Parse parses the frames at the start of buf and calls h for each valid one,
// in order. It returns how many bytes of buf it consumed: the frames handled
// plus, on a non-fatal error, the offending frame. The caller drops those
// bytes and calls Parse again with the rest plus whatever arrives next.
//
// A partial frame at the end of buf is left unconsumed (err nil). Limits are
// checked before waiting for more bytes: a control line longer than the limit
// or a size above MaxPayload fails at once.
//
// On error Parse stops and returns an *Error (or the Handler's error as is).
// If the *Error is Fatal, consumed stops before the offending frame and the
// stream cannot be resynchronised: the owner sends -ERR and closes. Otherwise
// the frame was consumed and skipped (nothing was handled for it): the owner
// answers -ERR and calls Parse again. Parse never panics on any input and
// does not allocate on the PUB/MSG hot path.
func (p *Parser) Parse(buf []byte, h Handler) (consumed int, err error) {
	p.pending = 0
	for consumed < len(buf) {
		n, err := p.next(buf[consumed:])
		if err != nil {
			return consumed + n, err
		}
		if n == 0 {
			break
		}
		if p.cmd.Op != OpInvalid {
			if err := h.HandleCommand(&p.cmd); err != nil {
				return consumed + n, err
			}
		}
		consumed += n
	}
	return consumed, nil
}

// next parses one frame at the start of b into p.cmd. It returns (0, nil)
// when b holds only part of a frame, (n, nil) with p.cmd.Op == OpInvalid for
// an empty line, (n > 0, err) for a non-fatal error and (0, err) for a fatal
// one.
func (p *Parser) next(b []byte) (int, error) {
	p.cmd = Command{}
	eol := bytes.IndexByte(b, '\n')
	if eol < 0 {
		if len(b) > p.lineLimit(b)+1 { // +1: a CR may still precede the LF
			return 0, &Error{Code: CodeMaxControlLine, Detail: p.limitDetail(b)}
		}
		return 0, nil
	}
	line := b[:eol]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	if len(line) > p.lim.MaxControlLine && len(line) > p.lineLimit(line) {
		return 0, &Error{Code: CodeMaxControlLine, Detail: p.limitDetail(line)}
	}
	verb, rest := nextToken(line)
	if len(verb) == 0 {
		return eol + 1, nil // empty line: ignored (telnet users press enter)
	}
	if p.dir == ClientToServer {
		return p.nextFromClient(b, eol, verb, rest)
	}
	return p.nextFromServer(b, eol, verb, rest)
}

func (p *Parser) nextFromClient(b []byte, eol int, verb, rest []byte) (int, error) {
	switch len(verb) {
	case 3:
		switch {
		case eqFold(verb, "PUB"):
			return p.parseSized(b, eol, rest, OpPub)
		case eqFold(verb, "SUB"):
			return p.finish(eol, p.parseSub(rest))
		case eqFold(verb, "ACK"):
			return p.finish(eol, p.parseAck(rest))
		}
	case 4:
		switch {
		case eqFold(verb, "HPUB"):
			return p.parseSized(b, eol, rest, OpHPub)
		case eqFold(verb, "PING"):
			return p.finish(eol, p.parseNoArgs(rest, OpPing))
		case eqFold(verb, "PONG"):
			return p.finish(eol, p.parseNoArgs(rest, OpPong))
		case eqFold(verb, "POLL"):
			return p.finish(eol, p.parsePoll(rest))
		case eqFold(verb, "NACK"):
			return p.finish(eol, p.parseHandleCmd(rest, OpNack))
		}
	case 5:
		switch {
		case eqFold(verb, "UNSUB"):
			return p.finish(eol, p.parseUnsub(rest))
		case eqFold(verb, "TOPIC"):
			return p.finish(eol, p.parseTopic(rest))
		case eqFold(verb, "GROUP"):
			return p.finish(eol, p.parseGroup(rest))
		}
	case 6:
		switch {
		case eqFold(verb, "REJECT"):
			return p.finish(eol, p.parseHandleCmd(rest, OpReject))
		case eqFold(verb, "EXTEND"):
			return p.finish(eol, p.parseHandleCmd(rest, OpExtend))
		}
	case 7:
		if eqFold(verb, "CONNECT") {
			p.cmd.Op = OpConnect
			p.cmd.JSON = trimSpace(rest)
			if len(p.cmd.JSON) == 0 {
				return 0, &Error{Code: CodeInvalidConnect, Detail: "CONNECT needs a JSON object"}
			}
			return eol + 1, nil
		}
	}
	return eol + 1, &Error{Code: CodeUnknownOp, Detail: quoteDetail(verb)}
}

func (p *Parser) nextFromServer(b []byte, eol int, verb, rest []byte) (int, error) {
	switch len(verb) {
	case 3:
		switch {
		case eqFold(verb, "MSG"):
			return p.parseSized(b, eol, rest, OpMsg)
		case eqFold(verb, "+OK"):
			p.cmd.Op = OpOK
			p.cmd.Text = trimSpace(rest)
			return eol + 1, nil
		}
	case 4:
		switch {
		case eqFold(verb, "HMSG"):
			return p.parseSized(b, eol, rest, OpHMsg)
		case eqFold(verb, "PING"):
			return p.finish(eol, p.parseNoArgs(rest, OpPing))
		case eqFold(verb, "PONG"):
			return p.finish(eol, p.parseNoArgs(rest, OpPong))
		case eqFold(verb, "-ERR"):
			p.cmd.Op = OpErr
			t := trimSpace(rest)
			if len(t) >= 2 && t[0] == '\'' && t[len(t)-1] == '\'' {
				t = t[1 : len(t)-1]
			}
			p.cmd.Text = t
			return eol + 1, nil
		case eqFold(verb, "INFO"):
			p.cmd.Op = OpInfo
			p.cmd.JSON = trimSpace(rest)
			if len(p.cmd.JSON) == 0 {
				return eol + 1, &Error{Code: CodeInvalidArgs, Detail: "INFO needs a JSON object"}
			}
			return eol + 1, nil
		}
	}
	return eol + 1, &Error{Code: CodeUnknownOp, Detail: quoteDetail(verb)}
}

// finish turns the result of a payload-less command into next's result.
func (p *Parser) finish(eol int, err *Error) (int, error) {
	if err != nil {
		p.cmd = Command{}
		return eol + 1, err
	}
	return eol + 1, nil
}

func (p *Parser) lineLimit(line []byte) int {
	verb, _ := nextToken(line)
	if eqFold(verb, "CONNECT") || eqFold(verb, "INFO") || eqFold(verb, "+OK") ||
		eqFold(verb, "TOPIC") || eqFold(verb, "GROUP") {
		return p.lim.MaxJSONLine
	}
	return p.lim.MaxControlLine
}

func (p *Parser) limitDetail(line []byte) string {
	return "limit " + string(wire.AppendUint(nil, uint64(p.lineLimit(line)))) + " bytes"
}
