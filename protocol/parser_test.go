package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"
)

// parseAll parses in (a fresh parser) and returns the events as in the
// vector tests, continuing after non-fatal errors.
func parseAll(t *testing.T, dir Direction, crc bool, lim Limits, in string) ([]vEvent, int) {
	t.Helper()
	name := "client_to_server"
	if dir == ServerToClient {
		name = "server_to_client"
	}
	v := frameVector{Name: t.Name(), Direction: name, CRC: crc,
		Limits: map[string]int{"max_control_line": lim.MaxControlLine, "max_payload": lim.MaxPayload}}
	return runChunks(t, v, [][]byte{[]byte(in)})
}

func TestParseVerbs(t *testing.T) {
	h := "$F.3.4.1.99.2"
	hdr := "NATS/1.0\r\nA: b\r\n\r\n"
	tests := []struct {
		name string
		dir  Direction
		crc  bool
		in   string
		want vEvent
	}{
		{"PUB", ClientToServer, false, "PUB s 2\r\nhi\r\n", vEvent{Op: "PUB", Subject: "s", Payload: "hi"}},
		{"PUB reply", ClientToServer, false, "PUB s r 2\r\nhi\r\n", vEvent{Op: "PUB", Subject: "s", Reply: "r", Payload: "hi"}},
		{"PUB crc", ClientToServer, true, "PUB s 2 d8932aac\r\nhi\r\n", vEvent{Op: "PUB", Subject: "s", Payload: "hi", CRC: "d8932aac", HasCRC: true}},
		{"PUB crc dash", ClientToServer, true, "PUB s r 2 -\r\nhi\r\n", vEvent{Op: "PUB", Subject: "s", Reply: "r", Payload: "hi", CRC: "d8932aac"}},
		{"HPUB", ClientToServer, false, "HPUB s 18 20\r\n" + hdr + "hi\r\n", vEvent{Op: "HPUB", Subject: "s", Header: hdr, Payload: "hi"}},
		{"HPUB reply crc", ClientToServer, true, "HPUB s r 18 20 -\r\n" + hdr + "hi\r\n", vEvent{Op: "HPUB", Subject: "s", Reply: "r", Header: hdr, Payload: "hi", CRC: crcHex(hdr + "hi")}},
		{"SUB", ClientToServer, false, "SUB a.> 5\r\n", vEvent{Op: "SUB", Subject: "a.>", Sid: "5"}},
		{"SUB group max", ClientToServer, false, "sub t g 5 100\r\n", vEvent{Op: "SUB", Subject: "t", Group: "g", Sid: "5", Max: 100}},
		{"UNSUB", ClientToServer, false, "UNSUB 5 3\r\n", vEvent{Op: "UNSUB", Sid: "5", Max: 3}},
		{"PING", ClientToServer, false, "PING\r\n", vEvent{Op: "PING"}},
		{"PONG", ClientToServer, false, "PONG\n", vEvent{Op: "PONG"}},
		{"CONNECT", ClientToServer, false, "CONNECT {}\r\n", vEvent{Op: "CONNECT", JSON: "{}"}},
		{"POLL", ClientToServer, false, "POLL t g 3 250\r\n", vEvent{Op: "POLL", Subject: "t", Group: "g", Max: 3, Millis: 250}},
		{"ACK", ClientToServer, false, "ACK " + h + "  " + h + "\r\n", vEvent{Op: "ACK", Handles: []string{h, h}}},
		{"NACK", ClientToServer, false, "NACK " + h + " 10\r\n", vEvent{Op: "NACK", Handles: []string{h}, Millis: 10}},
		{"REJECT", ClientToServer, false, "REJECT " + h + "\r\n", vEvent{Op: "REJECT", Handles: []string{h}}},
		{"EXTEND", ClientToServer, false, "EXTEND " + h + "\r\n", vEvent{Op: "EXTEND", Handles: []string{h}}},
		{"TOPIC CREATE", ClientToServer, false, "TOPIC CREATE t {\"a\": 1}\r\n", vEvent{Op: "TOPIC CREATE", Subject: "t", JSON: "{\"a\": 1}"}},
		{"TOPIC INFO", ClientToServer, false, "TOPIC INFO t\r\n", vEvent{Op: "TOPIC INFO", Subject: "t"}},
		{"TOPIC LIST", ClientToServer, false, "topic list\r\n", vEvent{Op: "TOPIC LIST"}},
		{"TOPIC DELETE", ClientToServer, false, "TOPIC DELETE t\r\n", vEvent{Op: "TOPIC DELETE", Subject: "t"}},
		{"GROUP CREATE", ClientToServer, false, "GROUP CREATE t g {}\r\n", vEvent{Op: "GROUP CREATE", Subject: "t", Group: "g", JSON: "{}"}},
		{"GROUP INFO", ClientToServer, false, "GROUP INFO t g\r\n", vEvent{Op: "GROUP INFO", Subject: "t", Group: "g"}},
		{"GROUP LIST", ClientToServer, false, "GROUP LIST t\r\n", vEvent{Op: "GROUP LIST", Subject: "t"}},
		{"GROUP DELETE", ClientToServer, false, "GROUP DELETE t g\r\n", vEvent{Op: "GROUP DELETE", Subject: "t", Group: "g"}},
		{"INFO", ServerToClient, false, "INFO {\"x\":1}\r\n", vEvent{Op: "INFO", JSON: "{\"x\":1}"}},
		{"+OK", ServerToClient, false, "+OK\r\n", vEvent{Op: "+OK"}},
		{"+OK confirm", ServerToClient, false, "+OK 1:2\r\n", vEvent{Op: "+OK", Text: "1:2"}},
		{"-ERR", ServerToClient, false, "-ERR 'x y'\r\n", vEvent{Op: "-ERR", Text: "x y"}},
		{"MSG", ServerToClient, false, "MSG s 1 2\r\nhi\r\n", vEvent{Op: "MSG", Subject: "s", Sid: "1", Payload: "hi"}},
		{"MSG handle crc", ServerToClient, true, "MSG s 0 " + h + " 2 d8932aac\r\nhi\r\n", vEvent{Op: "MSG", Subject: "s", Sid: "0", Reply: h, Payload: "hi", CRC: "d8932aac", HasCRC: true}},
		{"HMSG", ServerToClient, false, "HMSG s 1 r 18 20\r\n" + hdr + "hi\r\n", vEvent{Op: "HMSG", Subject: "s", Sid: "1", Reply: "r", Header: hdr, Payload: "hi"}},
		{"PING from server", ServerToClient, false, "PING\r\n", vEvent{Op: "PING"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, n := parseAll(t, tc.dir, tc.crc, Limits{}, tc.in)
			if n != len(tc.in) || len(got) != 1 || !reflect.DeepEqual(got[0], tc.want) {
				t.Fatalf("got %+v consumed %d/%d, want %+v", got, n, len(tc.in), tc.want)
			}
		})
	}
}

// crcHex is the CRC-32 (IEEE) of s as 8 lowercase hex digits, computed with
// the standard library, not the package's encoder.
func crcHex(s string) string { return fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(s))) }

// TestParseErrors has one case per error code the parser produces, checking
// the code, fatality and how much was consumed.
func TestParseErrors(t *testing.T) {
	small := Limits{MaxControlLine: 32, MaxPayload: 8}
	tests := []struct {
		name     string
		dir      Direction
		crc      bool
		lim      Limits
		in       string
		code     Code
		consumed int // of the whole input; -1: all of it
	}{
		{"unknown op", ClientToServer, false, Limits{}, "NOPE\r\n", CodeUnknownOp, -1},
		{"wrong direction", ServerToClient, false, Limits{}, "SUB a 1\r\n", CodeUnknownOp, -1},
		{"control line", ClientToServer, false, small, "SUB " + strings.Repeat("x", 40) + " 1\r\n", CodeMaxControlLine, 0},
		{"control line unterminated", ClientToServer, false, small, strings.Repeat("x", 34), CodeMaxControlLine, 0},
		{"payload", ClientToServer, false, small, "PUB a 9\r\n", CodeMaxPayload, 0},
		{"payload overflow", ClientToServer, false, Limits{}, "PUB a 184467440737095516160\r\n", CodeMaxPayload, 0},
		{"bad frame count", ClientToServer, false, Limits{}, "PUB a\r\n", CodeBadFrame, 0},
		{"bad frame size", ClientToServer, false, Limits{}, "PUB a 1x\r\n", CodeBadFrame, 0},
		{"bad frame terminator", ClientToServer, false, Limits{}, "PUB a 1\r\nxy\r\n", CodeBadFrame, 0},
		{"bad frame hdr", ClientToServer, false, Limits{}, "HPUB a 3 2\r\n", CodeBadFrame, 0},
		{"args", ClientToServer, false, Limits{}, "UNSUB\r\n", CodeInvalidArgs, -1},
		{"number", ClientToServer, false, Limits{}, "POLL t g x\r\n", CodeInvalidNumber, -1},
		{"overflow", ClientToServer, false, Limits{}, "POLL t g 1 99999999999\r\n", CodeNumberOverflow, -1},
		{"subject", ClientToServer, false, Limits{}, "PUB a..b 0\r\n\r\n", CodeInvalidSubject, -1},
		{"subject not utf-8", ClientToServer, false, Limits{}, "PUB pay.\xff 0\r\n\r\n", CodeInvalidSubject, -1},
		{"subject overlong utf-8", ClientToServer, false, Limits{}, "SUB a\xc0\xaf 1\r\n", CodeInvalidSubject, -1},
		{"wildcard", ClientToServer, false, Limits{}, "PUB a.* 0\r\n\r\n", CodeWildcardNotAllowed, -1},
		{"name", ClientToServer, false, Limits{}, "POLL t g/h 1\r\n", CodeInvalidName, -1},
		{"crc token", ClientToServer, true, Limits{}, "PUB a 0 0000000\r\n\r\n", CodeInvalidCRCToken, -1},
		{"crc mismatch", ClientToServer, true, Limits{}, "PUB a 2 00000000\r\nhi\r\n", CodeCRCMismatch, -1},
		{"header", ClientToServer, false, Limits{}, "HPUB a 2 2\r\nhi\r\n", CodeInvalidHeader, -1},
		{"handle", ClientToServer, false, Limits{}, "ACK $F.1\r\n", CodeInvalidHandle, -1},
		{"connect", ClientToServer, false, Limits{}, "CONNECT\r\n", CodeInvalidConnect, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewParser(tc.dir, tc.lim)
			p.SetCRC(tc.crc)
			called := 0
			n, err := p.Parse([]byte(tc.in), HandlerFunc(func(*Command) error { called++; return nil }))
			var pe *Error
			if !errors.As(err, &pe) || pe.Code != tc.code {
				t.Fatalf("Parse(%q) err = %v, want code %s", tc.in, err, tc.code)
			}
			if !errors.Is(err, &Error{Code: tc.code}) {
				t.Fatalf("errors.Is does not match code %s", tc.code)
			}
			want := tc.consumed
			if want < 0 {
				want = len(tc.in)
			}
			if n != want || called != 0 {
				t.Fatalf("consumed %d (want %d), handler called %d times", n, want, called)
			}
			if pe.Fatal() != (n == 0) {
				t.Fatalf("fatal=%v but consumed %d: fatal errors consume nothing of the frame, others all of it", pe.Fatal(), n)
			}
		})
	}
}

// TestParserCodesCovered checks that every code the parser can return has a
// vector, so the other SDKs test it too.
func TestParserCodesCovered(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range loadFrameFiles(t) {
		for _, v := range f.Vectors {
			for _, e := range v.Events {
				if e.Error != "" {
					seen[e.Error] = true
				}
			}
		}
	}
	for _, c := range []Code{CodeUnknownOp, CodeMaxControlLine, CodeMaxPayload, CodeBadFrame, CodeInvalidArgs,
		CodeInvalidNumber, CodeNumberOverflow, CodeInvalidSubject, CodeWildcardNotAllowed, CodeInvalidName,
		CodeInvalidCRCToken, CodeCRCMismatch, CodeInvalidHeader, CodeInvalidHandle, CodeInvalidConnect} {
		if !seen[string(c)] {
			t.Errorf("no vector produces %s", c)
		}
	}
}

func TestParseHandlerErrorStops(t *testing.T) {
	stop := errors.New("stop")
	p := NewParser(ClientToServer, Limits{})
	in := []byte("PING\r\nPONG\r\nPING\r\n")
	var ops []Op
	n, err := p.Parse(in, HandlerFunc(func(c *Command) error {
		ops = append(ops, c.Op)
		if c.Op == OpPong {
			return stop
		}
		return nil
	}))
	if err != stop || n != len("PING\r\nPONG\r\n") || !reflect.DeepEqual(ops, []Op{OpPing, OpPong}) {
		t.Fatalf("Parse = %d, %v, ops %v", n, err, ops)
	}
}

func TestParsePending(t *testing.T) {
	p := NewParser(ClientToServer, Limits{})
	in := []byte("PUB a 100\r\n" + strings.Repeat("x", 10))
	n, err := p.Parse(in, HandlerFunc(func(*Command) error { return nil }))
	if n != 0 || err != nil {
		t.Fatalf("Parse = %d, %v", n, err)
	}
	if want := len("PUB a 100\r\n") + 100 + 1; p.Pending() != want {
		t.Fatalf("Pending() = %d, want %d", p.Pending(), want)
	}
	// A bare-LF body completes at exactly Pending bytes; one ending in CR
	// then asks for the LF.
	in = []byte("PUB a 5\nhel")
	if n, err := p.Parse(in, HandlerFunc(func(*Command) error { return nil })); n != 0 || err != nil || p.Pending() != 14 {
		t.Fatalf("Parse = %d, %v, Pending %d; want 0, nil, 14", n, err, p.Pending())
	}
	frames := 0
	if n, err := p.Parse([]byte("PUB a 5\nhello\n"), HandlerFunc(func(*Command) error { frames++; return nil })); n != 14 || err != nil || frames != 1 {
		t.Fatalf("bare-LF frame of Pending bytes: %d, %v, %d frames", n, err, frames)
	}
	if n, err := p.Parse([]byte("PUB a 5\nhello\r"), HandlerFunc(func(*Command) error { return nil })); n != 0 || err != nil || p.Pending() != 15 {
		t.Fatalf("CR without LF: %d, %v, Pending %d; want 15", n, err, p.Pending())
	}
	if _, err := p.Parse([]byte("PING\r\n"), HandlerFunc(func(*Command) error { return nil })); err != nil || p.Pending() != 0 {
		t.Fatalf("Pending after a complete frame = %d, %v", p.Pending(), err)
	}
}

func TestParseBorrowedSlicesPointIntoBuffer(t *testing.T) {
	p := NewParser(ClientToServer, Limits{})
	in := []byte("PUB subj 5\r\nhello\r\n")
	_, err := p.Parse(in, HandlerFunc(func(c *Command) error {
		c.Payload[0] = 'J' // the payload is the caller's buffer, not a copy
		return nil
	}))
	if err != nil || !bytes.Contains(in, []byte("Jello")) {
		t.Fatalf("payload is not borrowed from the buffer: %q, %v", in, err)
	}
}

func TestSetLimits(t *testing.T) {
	p := NewParser(ServerToClient, Limits{})
	if got := p.Limits(); got.MaxPayload != DefaultMaxPayload || got.MaxControlLine != DefaultMaxControlLine || got.MaxJSONLine != DefaultMaxJSONLine {
		t.Fatalf("defaults = %+v", got)
	}
	p.SetLimits(Limits{MaxPayload: 4})
	_, err := p.Parse([]byte("MSG a 1 5\r\n"), HandlerFunc(func(*Command) error { return nil }))
	if !errors.Is(err, ErrMaxPayload) {
		t.Fatalf("after SetLimits: %v", err)
	}
	if p.Direction() != ServerToClient || p.CRC() {
		t.Fatal("Direction/CRC accessors")
	}
}

func TestOpStrings(t *testing.T) {
	for o := OpInfo; o < opCount; o++ {
		if ParseOp(o.String()) != o {
			t.Errorf("ParseOp(%q) != %d", o.String(), o)
		}
	}
	if Op(200).String() != "Op(200)" || ParseOp("NOPE") != OpInvalid {
		t.Fatal("unknown ops")
	}
	if !OpTopicCreate.Management() || OpPoll.Management() || !OpPoll.Fibril() || OpPub.Fibril() {
		t.Fatal("Management/Fibril")
	}
	if ClientToServer.String() != "client->server" || ServerToClient.String() != "server->client" {
		t.Fatal("Direction.String")
	}
}
