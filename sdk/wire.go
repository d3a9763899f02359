package fibril

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/fibrilmq/fibril/protocol"
)

// frameKind is what the server sent.
type frameKind uint8

const (
	fInfo   frameKind = iota + 1
	fMsg              // MSG or HMSG
	fBadMsg           // MSG/HMSG the parser refused (crc_mismatch, invalid_header, ...)
	fOK               // +OK [arg]
	fErr              // -ERR '<text>'
	fPing
	fPong
)

// frame is one decoded server frame. The frameReader reuses one frame value
// for every frame it decodes, so a *frame is valid until the next call to
// next; its slices reply, hdr and data are copied out of the read buffer
// into the reader's slab and stay valid for good, while text is borrowed
// from the read buffer (a confirm's argument is parsed, not kept, so
// copying it would cost an allocation per publish).
type frame struct {
	kind    frameKind
	subject string
	sid     uint64 // MSG/HMSG: the subscription id
	sidOK   bool   // sid is a decimal number
	reply   []byte // the ack handle
	hdr     []byte // header block, nil for MSG
	data    []byte
	crc     uint32
	hasCRC  bool
	arg     string          // -ERR text, INFO JSON
	text    []byte          // +OK argument, borrowed: valid until the next call to next
	bad     *protocol.Error // fBadMsg: why the parser refused it
}

// errStop makes protocol.Parser return after each frame, so that the reader
// knows where every frame starts (needed to identify a refused delivery).
var errStop = errors.New("stop")

// frameReader decodes server frames with the protocol package's parser.
type frameReader struct {
	r          io.Reader
	p          *protocol.Parser
	buf        []byte
	start, end int
	cur        *frame
	f          frame  // reused for every frame (see frame)
	slab       slab   // backing store of deliveries
	lastSubj   string // the subject of the last delivery, reused when equal
}

// readBufSize is the read buffer's starting size (it grows for a larger
// frame). Deliveries are copied out of it, so its size costs no retention:
// 32 KiB took a read call per 25 deliveries of 1 KiB; 128 KiB takes what a
// busy socket holds in about a third as many calls.
const readBufSize = 128 << 10

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{
		r:   r,
		p:   protocol.NewParser(protocol.ServerToClient, clientLimits(0)),
		buf: make([]byte, readBufSize),
	}
}

// setCRC switches CRC mode (right after CONNECT is written).
func (fr *frameReader) setCRC(on bool) { fr.p.SetCRC(on) }

// setMaxPayload adopts the server's limit. Dead letters carry extra headers
// on top of a payload that may already be at the limit, so the client allows
// some slack rather than dropping the connection on them.
func (fr *frameReader) setMaxPayload(n int) {
	if n > 0 {
		fr.p.SetLimits(clientLimits(n + 64<<10))
	}
}

// clientLimits are the parser limits for what the server sends. Answers to
// management verbs (TOPIC LIST with many topics) can be longer than the
// max_control_line the server enforces on clients, so the client accepts
// long lines: a misbehaving server is bounded by its own output, not by us.
func clientLimits(maxPayload int) protocol.Limits {
	return protocol.Limits{MaxControlLine: 1 << 20, MaxJSONLine: 1 << 20, MaxPayload: maxPayload}
}

// HandleCommand implements protocol.Handler: it copies the borrowed command
// into an owned frame and stops the parser.
func (fr *frameReader) HandleCommand(c *protocol.Command) error {
	f := &fr.f
	*f = frame{}
	switch c.Op {
	case protocol.OpInfo:
		f.kind, f.arg = fInfo, string(c.JSON)
	case protocol.OpOK:
		f.kind, f.text = fOK, c.Text
	case protocol.OpErr:
		f.kind, f.arg = fErr, string(c.Text)
	case protocol.OpPing:
		f.kind = fPing
	case protocol.OpPong:
		f.kind = fPong
	case protocol.OpMsg, protocol.OpHMsg:
		f.kind = fMsg
		if string(c.Subject) != fr.lastSubj { // no allocation to compare
			fr.lastSubj = string(c.Subject)
		}
		f.subject = fr.lastSubj
		f.sid, f.sidOK = parseSID(c.Sid)
		// one copy out of the read buffer: handle, header block, payload,
		// each capped so that an append by the caller reallocates
		r, h := len(c.Reply), len(c.Header)
		body := fr.slab.bytes(r + h + len(c.Payload))
		copy(body, c.Reply)
		copy(body[r:], c.Header)
		copy(body[r+h:], c.Payload)
		f.reply = body[:r:r]
		if h > 0 {
			f.hdr = body[r : r+h : r+h]
		}
		f.data = body[r+h:]
		f.crc, f.hasCRC = c.CRC, c.HasCRC
	default:
		return fmt.Errorf("%w: server sent %v", ErrProtocol, c.Op)
	}
	fr.cur = f
	return errStop
}

// next blocks until one whole frame has arrived.
func (fr *frameReader) next() (*frame, error) {
	for {
		if f, err := fr.buffered(); f != nil || err != nil {
			return f, err
		}
		if err := fr.fill(); err != nil {
			return nil, err
		}
	}
}

// buffered decodes the next frame already in the read buffer; it returns
// nil and no error when the buffer holds only part of one, or nothing. It
// never reads, so the text of the frames decoded since the last read stays
// valid (fill moves the buffer).
func (fr *frameReader) buffered() (*frame, error) {
	for fr.start < fr.end {
		fr.cur = nil
		n, err := fr.p.Parse(fr.buf[fr.start:fr.end], fr)
		raw := fr.buf[fr.start : fr.start+n]
		fr.start += n
		switch {
		case err == errStop:
			return fr.cur, nil
		case err != nil:
			var pe *protocol.Error
			if errors.As(err, &pe) && !pe.Fatal() && n > 0 {
				if f := refusedDelivery(raw, pe); f != nil {
					return f, nil
				}
			}
			return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
		case n == 0:
			return nil, nil // a partial frame
		}
		// n > 0: empty lines
	}
	return nil, nil
}

// fill reads more bytes, compacting and growing the buffer as needed.
func (fr *frameReader) fill() error {
	if fr.start > 0 {
		fr.end = copy(fr.buf, fr.buf[fr.start:fr.end])
		fr.start = 0
	}
	if need := fr.p.Pending(); need > len(fr.buf) {
		nb := make([]byte, need)
		copy(nb, fr.buf[:fr.end])
		fr.buf = nb
	} else if fr.end == len(fr.buf) {
		nb := make([]byte, 2*len(fr.buf))
		copy(nb, fr.buf[:fr.end])
		fr.buf = nb
	}
	n, err := fr.r.Read(fr.buf[fr.end:])
	fr.end += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// refusedDelivery identifies a MSG/HMSG the parser skipped with a non-fatal
// error (a checksum mismatch, a bad header block): it reads subject, sid and
// reply-to (the ack handle) from the frame's control line so the delivery
// can be reported and handed back. The protocol parser zeroes the command on
// such errors, hence this small second look at the line.
func refusedDelivery(raw []byte, pe *protocol.Error) *frame {
	line, _, _ := bytes.Cut(raw, []byte("\n"))
	toks := bytes.Fields(line)
	if len(toks) < 4 {
		return nil
	}
	verb := string(bytes.ToUpper(toks[0]))
	full := 0
	switch verb {
	case "MSG":
		full = 6 // MSG subj sid reply size crc
	case "HMSG":
		full = 7 // HMSG subj sid reply hdr total crc
	default:
		return nil
	}
	f := &frame{kind: fBadMsg, subject: string(toks[1]), bad: pe}
	f.sid, f.sidOK = parseSID(toks[2])
	if len(toks) == full {
		f.reply = bytes.Clone(toks[3])
	}
	return f
}

// parseSID parses a subscription id (decimal, at most 19 digits so that it
// cannot overflow).
func parseSID(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// appendPub encodes PUB or HPUB (when hdr is non-empty), with the CRC token
// in CRC mode.
func appendPub(b []byte, subject string, hdr, data []byte, crc bool) []byte {
	tok := protocol.NoCRC
	if crc {
		tok = protocol.ComputeCRC
	}
	if need := len(subject) + len(hdr) + len(data) + 64; cap(b)-len(b) < need {
		// one allocation of the right size instead of regrowing
		b = append(make([]byte, 0, len(b)+need), b...)
	}
	if len(hdr) > 0 {
		return protocol.AppendHPub(b, subject, "", hdr, data, tok)
	}
	return protocol.AppendPub(b, subject, "", data, tok)
}
