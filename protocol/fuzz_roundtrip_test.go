package protocol

import (
	"bytes"
	"testing"
)

// FuzzRoundTrip builds a command from fuzzed fields, encodes it, and parses
// it back: a command whose fields are valid must come back unchanged
// (parse(encode(x)) == x); any other must give an error, never a panic or a
// different command.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint8(OpPub), "orders", "", "", "", []byte(""), []byte("hello"), uint32(0), uint32(0), false)
	f.Add(uint8(OpHMsg), "a.b", "$F.1.2.0.5.1", "0", "", []byte("NATS/1.0\r\nK: v\r\n\r\n"), []byte("x"), uint32(0), uint32(0), true)
	f.Add(uint8(OpSub), "a.*", "", "7", "q", []byte(nil), []byte(nil), uint32(16), uint32(0), false)
	f.Add(uint8(OpPoll), "orders", "", "", "billing", []byte(nil), []byte(nil), uint32(10), uint32(5000), false)
	f.Add(uint8(OpNack), "", "", "", "", []byte(nil), []byte(nil), uint32(0), uint32(1000), false)
	f.Add(uint8(OpGroupCreate), "orders", "", "", "billing", []byte(nil), []byte(`{"lease_ms":1}`), uint32(0), uint32(0), false)
	f.Fuzz(func(t *testing.T, opb uint8, subject, reply, sid, group string, header, payload []byte, max, millis uint32, crc bool) {
		op := Op(opb % uint8(opCount))
		c := Command{Op: op}
		set := func(s string) []byte {
			if s == "" {
				return nil
			}
			return []byte(s)
		}
		h := Handle{Topic: uint64(max) + 1, Group: uint64(millis) + 1, Partition: max, Seq: uint64(millis) + 1, Attempt: max%7 + 1}
		switch op {
		case OpPub, OpMsg:
			c.Subject, c.Reply, c.Payload = set(subject), set(reply), set(string(payload))
		case OpHPub, OpHMsg:
			c.Subject, c.Reply, c.Header, c.Payload = set(subject), set(reply), set(string(header)), set(string(payload))
		case OpSub:
			c.Subject, c.Group, c.Max = set(subject), set(group), int64(max%MaxCount)
		case OpUnsub:
			c.Max = int64(max % MaxCount)
		case OpPoll:
			c.Subject, c.Group, c.Max, c.Millis = set(subject), set(group), int64(max%MaxCount), int64(millis)
		case OpAck, OpReject:
			c.Handles = []Handle{h}
		case OpNack, OpExtend:
			c.Handles, c.Millis = []Handle{h}, int64(millis)
		case OpTopicCreate, OpTopicInfo, OpTopicDelete, OpTopicRequeue, OpGroupList:
			c.Subject = set(subject)
		case OpGroupCreate, OpGroupInfo, OpGroupDelete:
			c.Subject, c.Group = set(subject), set(group)
		case OpOK, OpErr:
			c.Text = set(string(payload))
		case OpInfo, OpConnect:
			c.JSON = set(string(payload))
		}
		if op == OpTopicCreate || op == OpTopicRequeue || op == OpGroupCreate {
			c.JSON = set(string(payload))
		}
		if op == OpSub || op == OpUnsub || op == OpMsg || op == OpHMsg {
			c.Sid = set(sid)
		}
		dir := ClientToServer
		if op == OpInfo || op == OpOK || op == OpErr || op == OpMsg || op == OpHMsg {
			dir = ServerToClient
		}
		c.HasCRC = crc || dir == ServerToClient
		wire, err := AppendCommand(nil, &c, crc)
		if err != nil {
			return // OpInvalid
		}
		p := NewParser(dir, Limits{MaxControlLine: 1 << 16, MaxPayload: 1 << 20})
		p.SetCRC(crc)
		var got []vEvent
		n, perr := p.Parse(wire, HandlerFunc(func(pc *Command) error {
			got = append(got, eventOf(pc, crc))
			return nil
		}))
		if n < 0 || n > len(wire) {
			t.Fatalf("consumed %d of %d", n, len(wire))
		}
		if !roundTripValid(&c) {
			return // invalid fields: any outcome but a panic is fine
		}
		want := eventOf(&c, false)
		if crc && hasBody(op) {
			want.CRC = crcHex(string(c.Header) + string(c.Payload))
		}
		want.HasCRC = crc && hasBody(op) && c.HasCRC
		if perr != nil || n != len(wire) || len(got) != 1 || !equalEvent(got[0], want) {
			t.Fatalf("parse(encode(x)) != x\n   x %+v\nwire %q\n got %+v (%d/%d, %v)", want, wire, got, n, len(wire), perr)
		}
	})
}

func equalEvent(a, b vEvent) bool {
	return a.Op == b.Op && a.Subject == b.Subject && a.Reply == b.Reply && a.Group == b.Group &&
		a.Sid == b.Sid && a.Header == b.Header && a.Payload == b.Payload && a.CRC == b.CRC &&
		a.HasCRC == b.HasCRC && a.Max == b.Max && a.Millis == b.Millis && a.Text == b.Text &&
		a.JSON == b.JSON && len(a.Handles) == len(b.Handles) && (len(a.Handles) == 0 || a.Handles[0] == b.Handles[0])
}

// roundTripValid reports whether every field of c is one the grammar can
// carry unchanged (SPEC.md sections 2 and 6).
func roundTripValid(c *Command) bool {
	pubSubj := func(b []byte) bool { return checkSubject(b, false) == "" }
	optReply := func(b []byte) bool { return len(b) == 0 || pubSubj(b) }
	restOfLine := func(b []byte, empty bool) bool {
		if len(b) == 0 {
			return empty
		}
		return !bytes.ContainsAny(b, "\r\n") && !isSpace(b[0]) && !isSpace(b[len(b)-1])
	}
	switch c.Op {
	case OpPub:
		return pubSubj(c.Subject) && optReply(c.Reply)
	case OpMsg:
		return pubSubj(c.Subject) && optReply(c.Reply) && validToken(c.Sid)
	case OpHPub:
		return pubSubj(c.Subject) && optReply(c.Reply) && validHeaderBlock(c.Header)
	case OpHMsg:
		return pubSubj(c.Subject) && optReply(c.Reply) && validToken(c.Sid) && validHeaderBlock(c.Header)
	case OpSub:
		if c.Max > 0 && len(c.Group) == 0 {
			return false // max-inflight needs a group slot
		}
		return checkSubject(c.Subject, true) == "" && (len(c.Group) == 0 || validToken(c.Group)) &&
			validToken(c.Sid) && string(c.Sid) != "0"
	case OpUnsub:
		return validToken(c.Sid)
	case OpPoll:
		return pubSubj(c.Subject) && validGroupName(c.Group) && c.Max >= 1
	case OpTopicCreate, OpTopicRequeue:
		return pubSubj(c.Subject) && (len(c.JSON) == 0 || restOfLine(c.JSON, true))
	case OpTopicInfo, OpTopicDelete, OpGroupList:
		return pubSubj(c.Subject)
	case OpGroupCreate:
		return pubSubj(c.Subject) && validGroupName(c.Group) && (len(c.JSON) == 0 || restOfLine(c.JSON, true))
	case OpGroupInfo, OpGroupDelete:
		return pubSubj(c.Subject) && validGroupName(c.Group)
	case OpInfo, OpConnect:
		return restOfLine(c.JSON, false)
	case OpOK:
		return len(c.Text) == 0 || restOfLine(c.Text, true)
	case OpErr:
		return restOfLine(c.Text, true) && !bytes.ContainsRune(c.Text, '\'')
	}
	return true // PING, PONG, ACK family
}
