package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
	"time"
)

// WireDriver speaks SPEC.md directly: it formats every command itself and
// decodes every answer itself, with no SDK and no shared parser, so it checks
// the server against the text of the spec.
type WireDriver struct{}

// Name implements Driver.
func (WireDriver) Name() string { return "wire" }

// wireError is an -ERR answer: its first word is the code.
type wireError struct{ Code, Text string }

// Error implements error.
func (e *wireError) Error() string { return "-ERR '" + e.Text + "'" }

func newWireError(text string) *wireError {
	code, _, _ := strings.Cut(text, " ")
	return &wireError{Code: code, Text: text}
}

// Open implements Driver.
func (WireDriver) Open(ctx context.Context, addr string, o SessionOptions) (Session, error) {
	s := &wireSession{addr: addr, crc: o.CRC, queued: map[uint64][]*Delivery{}}
	if err := s.dial(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

type wireSession struct {
	addr       string
	crc        bool
	rc         *rawConn
	info       map[string]any
	window     int
	nextSID    uint64
	queued     map[uint64][]*Delivery // pushed deliveries read while waiting for something else
	sidTopic   map[uint64][2]string
	maxPayload int
}

func deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(30 * time.Second)
}

func (s *wireSession) dial(ctx context.Context) error {
	rc, err := dialRaw(ctx, s.addr)
	if err != nil {
		return err
	}
	line, err := rc.line(deadline(ctx))
	if err != nil {
		rc.close()
		return fmt.Errorf("reading INFO: %w", err)
	}
	js, ok := strings.CutPrefix(line, "INFO ")
	if !ok {
		rc.close()
		return fmt.Errorf("first line is not INFO: %q", line)
	}
	if err := json.Unmarshal([]byte(js), &s.info); err != nil {
		rc.close()
		return fmt.Errorf("INFO json: %w", err)
	}
	s.window = intField(s.info, "max_unconfirmed", 256)
	s.maxPayload = intField(s.info, "max_payload", 1<<20)
	connect := fmt.Sprintf(`CONNECT {"verbose":false,"pedantic":false,"lang":"wire","version":"0","protocol":1,"headers":true,"fibril":1,"confirm":true,"crc":%t}`+"\r\n", s.crc)
	s.rc = rc
	if err := rc.write([]byte(connect)); err != nil {
		return err
	}
	if _, err := s.answer(ctx); err != nil {
		rc.close()
		return fmt.Errorf("CONNECT: %w", err)
	}
	return nil
}

func intField(m map[string]any, k string, def int) int {
	if v, ok := m[k].(float64); ok && v > 0 {
		return int(v)
	}
	return def
}

// wireFrame is one decoded server frame.
type wireFrame struct {
	verb string // +OK -ERR PONG MSG
	arg  string
	d    *Delivery
	sid  uint64
}

// frame reads the next frame that is not PING or INFO (it answers PING).
func (s *wireSession) frame(dl time.Time) (*wireFrame, error) {
	for {
		line, err := s.rc.line(dl)
		if err != nil {
			return nil, err
		}
		verb, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "PING":
			if err := s.rc.write([]byte("PONG\r\n")); err != nil {
				return nil, err
			}
			continue
		case "INFO":
			continue
		case "+OK":
			return &wireFrame{verb: "+OK", arg: strings.TrimSpace(rest)}, nil
		case "-ERR":
			t := strings.TrimSpace(rest)
			t = strings.TrimSuffix(strings.TrimPrefix(t, "'"), "'")
			return &wireFrame{verb: "-ERR", arg: t}, nil
		case "PONG":
			return &wireFrame{verb: "PONG"}, nil
		case "MSG", "HMSG":
			return s.msg(strings.ToUpper(verb) == "HMSG", rest, dl)
		}
		return nil, fmt.Errorf("unexpected line from server: %q", line)
	}
}

// msg decodes MSG <subject> <sid> [reply] <size> [crc] (HMSG: <hdr> <total>)
// and its body, and checks the CRC the server sent.
func (s *wireSession) msg(hasHdr bool, rest string, dl time.Time) (*wireFrame, error) {
	t := strings.Fields(rest)
	n := 3
	if hasHdr {
		n++
	}
	if s.crc {
		n++
	}
	if len(t) != n && len(t) != n+1 {
		return nil, fmt.Errorf("MSG with %d tokens: %q", len(t), rest)
	}
	sid, err := strconv.ParseUint(t[1], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("MSG sid %q", t[1])
	}
	d := &Delivery{Subject: t[0]}
	i := 2
	if len(t) == n+1 {
		d.Handle = t[2]
		i = 3
	}
	hdrLen := 0
	if hasHdr {
		if hdrLen, err = strconv.Atoi(t[i]); err != nil {
			return nil, fmt.Errorf("HMSG header size %q", t[i])
		}
		i++
	}
	total, err := strconv.Atoi(t[i])
	if err != nil || total < hdrLen {
		return nil, fmt.Errorf("MSG size %q", t[i])
	}
	body, err := s.rc.bytesN(total, dl)
	if err != nil {
		return nil, err
	}
	if s.crc {
		want := t[i+1]
		if got := fmt.Sprintf("%08x", crc32.ChecksumIEEE(body)); got != want {
			return nil, fmt.Errorf("server sent CRC %s for bytes whose CRC is %s", want, got)
		}
	}
	if hasHdr {
		if d.Header, err = parseWireHeader(body[:hdrLen]); err != nil {
			return nil, err
		}
	}
	d.Data = body[hdrLen:]
	fillFromHandle(d)
	return &wireFrame{verb: "MSG", d: d, sid: sid}, nil
}

// fillFromHandle reads partition, seq and delivery count out of the handle
// $F.<topic-id>.<group-id>.<partition>.<seq>.<attempt>.
func fillFromHandle(d *Delivery) {
	p := strings.Split(d.Handle, ".")
	if len(p) != 6 || p[0] != "$F" {
		return
	}
	d.Partition, _ = strconv.Atoi(p[3])
	d.Seq, _ = strconv.ParseUint(p[4], 10, 64)
	d.DeliveryCount, _ = strconv.Atoi(p[5])
}

func parseWireHeader(b []byte) (map[string][]string, error) {
	lines := strings.Split(string(b), "\r\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "NATS/1.0") {
		return nil, fmt.Errorf("header block does not start with NATS/1.0: %q", b)
	}
	h := map[string][]string{}
	for _, l := range lines[1:] {
		if l == "" {
			continue
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			return nil, fmt.Errorf("header line without colon: %q", l)
		}
		h[strings.TrimSpace(k)] = append(h[strings.TrimSpace(k)], strings.TrimSpace(v))
	}
	return h, nil
}

// answer reads the answer to the oldest command: +OK / -ERR / PONG, queuing
// pushed deliveries that arrive meanwhile.
func (s *wireSession) answer(ctx context.Context) (string, error) {
	for {
		f, err := s.frame(deadline(ctx))
		if err != nil {
			return "", err
		}
		switch f.verb {
		case "MSG":
			if f.sid == 0 {
				return "", errors.New("sid 0 delivery outside a POLL")
			}
			s.queued[f.sid] = append(s.queued[f.sid], f.d)
			continue
		case "-ERR":
			return "", newWireError(f.arg)
		}
		return f.arg, nil
	}
}

// errorAfterWriteFailed reads what the server sent before a write failed
// and returns its -ERR, or nil.
func (s *wireSession) errorAfterWriteFailed(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := s.answer(ctx)
	var we *wireError
	if errors.As(err, &we) {
		return we
	}
	return nil
}

func (s *wireSession) roundTrip(ctx context.Context, cmd string) (string, error) {
	if err := s.rc.write([]byte(cmd + "\r\n")); err != nil {
		return "", err
	}
	return s.answer(ctx)
}

func (s *wireSession) encodePub(m OutMsg) []byte {
	h := map[string]string{}
	for k, v := range m.Header {
		h[k] = v
	}
	if m.Key != "" {
		h["Fibril-Key"] = m.Key
	}
	if m.MsgID != "" {
		h["Nats-Msg-Id"] = m.MsgID
	}
	var hdr []byte
	if len(h) > 0 {
		hdr = []byte("NATS/1.0\r\n")
		keys := make([]string, 0, len(h))
		for k := range h {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			hdr = append(hdr, k+": "+h[k]+"\r\n"...)
		}
		hdr = append(hdr, "\r\n"...)
	}
	var b bytes.Buffer
	if hdr != nil {
		fmt.Fprintf(&b, "HPUB %s %d %d", m.Subject, len(hdr), len(hdr)+len(m.Data))
	} else {
		fmt.Fprintf(&b, "PUB %s %d", m.Subject, len(m.Data))
	}
	if s.crc {
		c := crc32.Update(crc32.ChecksumIEEE(hdr), crc32.IEEETable, m.Data)
		fmt.Fprintf(&b, " %08x", c)
	}
	b.WriteString("\r\n")
	b.Write(hdr)
	b.Write(m.Data)
	b.WriteString("\r\n")
	return b.Bytes()
}

func parsePosition(arg string) (Position, error) {
	if arg == "-" {
		return Position{}, nil
	}
	pos, mark, marked := strings.Cut(arg, " ")
	p, q, ok := strings.Cut(pos, ":")
	pn, err1 := strconv.Atoi(p)
	sq, err2 := strconv.ParseUint(q, 10, 64)
	if !ok || err1 != nil || err2 != nil || (marked && mark != "duplicate") {
		return Position{}, fmt.Errorf("confirm %q is not <partition>:<seq>, <partition>:<seq> duplicate or -", arg)
	}
	return Position{Stored: true, Partition: pn, Seq: sq, Duplicate: marked}, nil
}

// Publish implements Session.
func (s *wireSession) Publish(ctx context.Context, m OutMsg) (Position, error) {
	if err := s.rc.write(s.encodePub(m)); err != nil {
		// The server may have refused the frame and closed while it was
		// still being written: its -ERR says why, if it arrived.
		if werr := s.errorAfterWriteFailed(ctx); werr != nil {
			return Position{}, werr
		}
		return Position{}, err
	}
	arg, err := s.answer(ctx)
	if err != nil {
		return Position{}, err
	}
	return parsePosition(arg)
}

// PublishMany implements Session: it writes up to max_unconfirmed frames at
// once, then reads their confirms.
func (s *wireSession) PublishMany(ctx context.Context, msgs []OutMsg) ([]Position, []error) {
	pos := make([]Position, len(msgs))
	errs := make([]error, len(msgs))
	for start := 0; start < len(msgs); start += s.window {
		end := min(start+s.window, len(msgs))
		var b []byte
		for _, m := range msgs[start:end] {
			b = append(b, s.encodePub(m)...)
		}
		if err := s.rc.write(b); err != nil {
			for i := start; i < len(msgs); i++ {
				errs[i] = err
			}
			return pos, errs
		}
		for i := start; i < end; i++ {
			arg, err := s.answer(ctx)
			if err == nil {
				pos[i], err = parsePosition(arg)
			}
			errs[i] = err
		}
	}
	return pos, errs
}

// Poll implements Session.
func (s *wireSession) Poll(ctx context.Context, topic, group string, max int, wait time.Duration) ([]*Delivery, error) {
	cmd := fmt.Sprintf("POLL %s %s %d", topic, group, max)
	if wait > 0 {
		cmd += fmt.Sprintf(" %d", wait.Milliseconds())
	}
	if err := s.rc.write([]byte(cmd + "\r\n")); err != nil {
		return nil, err
	}
	var got []*Delivery
	dl := deadline(ctx)
	for {
		f, err := s.frame(dl)
		if err != nil {
			return got, err
		}
		switch f.verb {
		case "MSG":
			if f.sid != 0 {
				s.queued[f.sid] = append(s.queued[f.sid], f.d)
				continue
			}
			got = append(got, f.d)
		case "-ERR":
			return got, newWireError(f.arg)
		case "+OK":
			n, err := strconv.Atoi(f.arg)
			if err != nil || n != len(got) {
				return got, fmt.Errorf("POLL ended with +OK %q after %d deliveries", f.arg, len(got))
			}
			return got, nil
		default:
			return got, fmt.Errorf("POLL answered by %s", f.verb)
		}
	}
}

// Settle implements Session.
func (s *wireSession) Settle(ctx context.Context, d *Delivery, op string, ms int) error {
	return s.SettleHandle(ctx, d.Handle, op, ms)
}

// SettleHandle implements Session.
func (s *wireSession) SettleHandle(ctx context.Context, handle, op string, ms int) error {
	cmd := strings.ToUpper(op) + " " + handle
	if ms > 0 {
		cmd += " " + strconv.Itoa(ms)
	}
	_, err := s.roundTrip(ctx, cmd)
	return err
}

// Subscribe implements Session.
func (s *wireSession) Subscribe(ctx context.Context, topic, group string, maxInflight int) (Subscription, error) {
	s.nextSID++
	sid := s.nextSID
	cmd := fmt.Sprintf("SUB %s %s %d", topic, group, sid)
	if maxInflight > 0 {
		cmd += fmt.Sprintf(" %d", maxInflight)
	}
	if _, err := s.roundTrip(ctx, cmd); err != nil {
		return nil, err
	}
	return &wireSub{s: s, sid: sid}, nil
}

type wireSub struct {
	s   *wireSession
	sid uint64
}

// Next implements Subscription.
func (w *wireSub) Next(ctx context.Context) (*Delivery, error) {
	s := w.s
	for {
		if q := s.queued[w.sid]; len(q) > 0 {
			s.queued[w.sid] = q[1:]
			return q[0], nil
		}
		f, err := s.frame(deadline(ctx))
		if err != nil {
			return nil, err
		}
		if f.verb != "MSG" || f.sid == 0 {
			return nil, fmt.Errorf("unsolicited %s %q while waiting for deliveries", f.verb, f.arg)
		}
		s.queued[f.sid] = append(s.queued[f.sid], f.d)
	}
}

// Stop implements Subscription.
func (w *wireSub) Stop(ctx context.Context) error {
	_, err := w.s.roundTrip(ctx, fmt.Sprintf("UNSUB %d", w.sid))
	delete(w.s.queued, w.sid)
	return err
}

// Admin implements Session.
func (s *wireSession) Admin(ctx context.Context, words []string, arg json.RawMessage) (json.RawMessage, error) {
	cmd := strings.Join(words, " ")
	if len(arg) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, arg); err != nil {
			return nil, err
		}
		cmd += " " + b.String()
	}
	ans, err := s.roundTrip(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(ans), nil
}

// Restarted implements Session: the old socket is dead, dial again.
func (s *wireSession) Restarted(ctx context.Context) error {
	s.rc.close()
	s.queued = map[uint64][]*Delivery{}
	var err error
	for time.Now().Before(deadline(ctx)) {
		if err = s.dial(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return err
}

// Close implements Session.
func (s *wireSession) Close() error { return s.rc.close() }
