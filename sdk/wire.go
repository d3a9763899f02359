package fibril

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
)

// frameKind is what the server sent.
type frameKind uint8

const (
	fInfo frameKind = iota + 1
	fMsg            // MSG or HMSG
	fOK             // +OK [arg]
	fErr            // -ERR '<text>'
	fPing
	fPong
)

// frame is one decoded server frame. Its slices are owned by the frame (the
// reader copies them out of its buffer), so it may outlive the next read.
type frame struct {
	kind    frameKind
	subject string
	sid     uint64
	reply   string
	hdr     []byte // raw NATS/1.0 header block, nil for MSG
	data    []byte
	crc     uint32
	hasCRC  bool
	arg     string // +OK argument, -ERR text (quotes stripped), INFO JSON
}

// frameReader decodes server frames from a byte stream.
type frameReader struct {
	r       *bufio.Reader
	crcMode bool // MSG/HMSG carry a final CRC token
	maxLine int
}

func newFrameReader(r io.Reader, crc bool) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), crcMode: crc, maxLine: 1 << 20}
}

// next blocks until one whole frame has arrived.
func (fr *frameReader) next() (*frame, error) {
	line, err := fr.readLine()
	if err != nil {
		return nil, err
	}
	verb, rest, _ := bytes.Cut(line, []byte(" "))
	if i := bytes.IndexByte(verb, '\t'); i >= 0 {
		verb, rest = line[:i], line[i+1:]
	}
	rest = bytes.TrimLeft(rest, " \t")
	switch string(bytes.ToUpper(verb)) {
	case "+OK":
		return &frame{kind: fOK, arg: string(bytes.TrimSpace(rest))}, nil
	case "-ERR":
		t := bytes.TrimSpace(rest)
		t = bytes.TrimSuffix(bytes.TrimPrefix(t, []byte("'")), []byte("'"))
		return &frame{kind: fErr, arg: string(t)}, nil
	case "PING":
		return &frame{kind: fPing}, nil
	case "PONG":
		return &frame{kind: fPong}, nil
	case "INFO":
		return &frame{kind: fInfo, arg: string(rest)}, nil
	case "MSG":
		return fr.readMsg(rest, false)
	case "HMSG":
		return fr.readMsg(rest, true)
	}
	return nil, fmt.Errorf("%w: unknown frame %.40q", ErrProtocol, line)
}

func (fr *frameReader) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := fr.r.ReadSlice('\n')
		line = append(line, chunk...)
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			return nil, err
		}
		if len(line) > fr.maxLine {
			return nil, fmt.Errorf("%w: control line over %d bytes", ErrProtocol, fr.maxLine)
		}
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}

// readMsg parses "MSG subj sid [reply] size [crc]" or the HMSG form and reads
// the body that follows.
func (fr *frameReader) readMsg(args []byte, hasHdr bool) (*frame, error) {
	toks := bytes.Fields(args)
	n := len(toks)
	base := 3 // subj sid size
	if hasHdr {
		base = 4
	}
	if fr.crcMode {
		base++
	}
	if n != base && n != base+1 {
		return nil, fmt.Errorf("%w: MSG with %d arguments", ErrProtocol, n)
	}
	f := &frame{kind: fMsg, subject: string(toks[0])}
	sid, err := strconv.ParseUint(string(toks[1]), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: bad sid %q", ErrProtocol, toks[1])
	}
	f.sid = sid
	i := 2
	if n == base+1 {
		f.reply = string(toks[2])
		i = 3
	}
	hdrLen := 0
	if hasHdr {
		if hdrLen, err = strconv.Atoi(string(toks[i])); err != nil || hdrLen < 0 {
			return nil, fmt.Errorf("%w: bad header size %q", ErrProtocol, toks[i])
		}
		i++
	}
	total, err := strconv.Atoi(string(toks[i]))
	if err != nil || total < hdrLen {
		return nil, fmt.Errorf("%w: bad size %q", ErrProtocol, toks[i])
	}
	i++
	if fr.crcMode {
		v, err := strconv.ParseUint(string(toks[i]), 16, 32)
		if err != nil || len(toks[i]) != 8 {
			return nil, fmt.Errorf("%w: bad crc token %q", ErrProtocol, toks[i])
		}
		f.crc, f.hasCRC = uint32(v), true
	}
	body := make([]byte, total+2)
	if _, err := io.ReadFull(fr.r, body); err != nil {
		return nil, err
	}
	if body[total] != '\r' || body[total+1] != '\n' {
		return nil, fmt.Errorf("%w: payload not followed by CRLF", ErrProtocol)
	}
	body = body[:total]
	if hasHdr {
		f.hdr = body[:hdrLen]
	}
	f.data = body[hdrLen:]
	return f, nil
}

// crcOf is the wire checksum of a frame body (header block + payload).
func crcOf(hdr, data []byte) uint32 {
	c := crc32.ChecksumIEEE(hdr)
	return crc32.Update(c, crc32.IEEETable, data)
}

// appendPub encodes PUB or HPUB (when hdr is non-empty) with the CRC token
// when crc is true.
func appendPub(b []byte, subject string, hdr, data []byte, crc bool) []byte {
	if len(hdr) > 0 {
		b = append(b, "HPUB "...)
		b = append(b, subject...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(len(hdr)), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(len(hdr)+len(data)), 10)
	} else {
		b = append(b, "PUB "...)
		b = append(b, subject...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(len(data)), 10)
	}
	if crc {
		b = append(b, ' ')
		b = appendHex8(b, crcOf(hdr, data))
	}
	b = append(b, "\r\n"...)
	b = append(b, hdr...)
	b = append(b, data...)
	return append(b, "\r\n"...)
}

func appendHex8(b []byte, v uint32) []byte {
	const digits = "0123456789abcdef"
	for s := 28; s >= 0; s -= 4 {
		b = append(b, digits[(v>>uint(s))&0xf])
	}
	return b
}
