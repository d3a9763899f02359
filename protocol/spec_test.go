package protocol

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestSpecTelnetSession replays the worked session of SPEC.md section 15:
// both directions must parse, every checksum and size in it must be right,
// every -ERR must carry a known code, and every JSON object must decode
// strictly into the Go types, so the example cannot drift from the contract.
func TestSpecTelnetSession(t *testing.T) {
	raw, err := os.ReadFile("../SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := bytes.Cut(raw, []byte("## 15 Worked telnet session"))
	if !ok {
		t.Fatal("SPEC.md has no section 15")
	}
	_, block, _ := bytes.Cut(sec, []byte("```\n"))
	block, _, _ = bytes.Cut(block, []byte("```"))
	var client, server []byte
	for _, line := range strings.Split(string(block), "\n") {
		switch {
		case strings.HasPrefix(line, "C:"):
			client = append(client, strings.TrimPrefix(strings.TrimPrefix(line, "C:"), " ")+"\r\n"...)
		case strings.HasPrefix(line, "S:"):
			server = append(server, strings.TrimPrefix(strings.TrimPrefix(line, "S:"), " ")+"\r\n"...)
		}
	}
	if len(client) == 0 || len(server) == 0 {
		t.Fatal("session block not found")
	}

	// Client side: CRC mode switches on after CONNECT; the two refusals in
	// the session are the only errors.
	cp := NewParser(ClientToServer, Limits{})
	var errs []Code
	var ops []Op
	h := HandlerFunc(func(c *Command) error {
		ops = append(ops, c.Op)
		switch c.Op {
		case OpConnect:
			conn, err := ParseConnect(c.JSON)
			if err != nil {
				t.Fatalf("CONNECT: %v", err)
			}
			cp.SetCRC(conn.CRC)
		case OpTopicCreate:
			var tc TopicConfig
			if err := DecodeStrict(c.JSON, &tc); err != nil {
				t.Errorf("TOPIC CREATE json: %v", err)
			}
		case OpGroupCreate:
			var gc GroupConfig
			if err := DecodeStrict(c.JSON, &gc); err != nil {
				t.Errorf("GROUP CREATE json: %v", err)
			}
		}
		return nil
	})
	for buf := client; len(buf) > 0; {
		n, err := cp.Parse(buf, h)
		buf = buf[n:]
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Fatal() {
				t.Fatalf("client stream: %v", err)
			}
			errs = append(errs, pe.Code)
			continue
		}
		if n == 0 {
			t.Fatalf("client stream: partial frame left: %q", buf)
		}
	}
	if want := []Code{CodeCRCMismatch, CodeUnknownOp}; !equalCodes(errs, want) {
		t.Errorf("client stream errors %v, want %v", errs, want)
	}
	if len(ops) != 18 {
		t.Errorf("client stream parsed %d commands, the session has 18", len(ops))
	}

	// Server side: every frame parses in CRC mode, checksums verified.
	sp := NewParser(ServerToClient, Limits{})
	sp.SetCRC(true)
	var answers int
	sh := HandlerFunc(func(c *Command) error {
		answers++
		switch c.Op {
		case OpInfo:
			var info Info
			if err := DecodeStrict(c.JSON, &info); err != nil {
				t.Errorf("INFO: %v", err)
			}
		case OpErr:
			if e := ParseErrText(c.Text); !e.Code.Known() {
				t.Errorf("-ERR %q has no known code", c.Text)
			}
		case OpOK:
			if len(c.Text) > 0 && c.Text[0] == '{' && !decodesAsAnswer(c.Text) {
				t.Errorf("+OK %s does not decode strictly into a management answer type", c.Text)
			}
		case OpMsg, OpHMsg:
			if !c.HasCRC {
				t.Errorf("%v without checksum", c.Op)
			}
			if string(c.Sid) == "0" {
				if _, err := ParseHandle(c.Reply); err != nil {
					t.Errorf("POLL delivery reply %q: %v", c.Reply, err)
				}
			}
		}
		return nil
	})
	n, err := sp.Parse(server, sh)
	if err != nil || n != len(server) {
		t.Fatalf("server stream: consumed %d of %d: %v", n, len(server), err)
	}
}

func decodesAsAnswer(js []byte) bool {
	for _, v := range []any{&TopicInfo{}, &GroupInfo{}, &TopicList{}, &GroupList{}, &Deleted{}} {
		if DecodeStrict(js, v) == nil {
			return true
		}
	}
	return false
}

func equalCodes(a, b []Code) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
