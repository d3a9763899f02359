package protocol

import (
	"bytes"
	"testing"
)

// TestHotPathAllocs makes an allocation on the PUB/MSG path a test failure,
// not just a benchmark number.
func TestHotPathAllocs(t *testing.T) {
	h := Handle{Topic: 3, Group: 7, Partition: 2, Seq: 123456789, Attempt: 1}
	hdr := AppendHeader(nil, HeaderKey, "k")
	payload := bytes.Repeat([]byte("x"), 256)
	tests := []struct {
		name string
		dir  Direction
		crc  bool
		in   []byte
	}{
		{"PUB", ClientToServer, false, AppendPub(nil, "orders.eu", "", payload, NoCRC)},
		{"PUB crc reply", ClientToServer, true, AppendPub(nil, "orders.eu", "_INBOX.x", payload, ComputeCRC)},
		{"HPUB crc", ClientToServer, true, AppendHPub(nil, "orders", "", hdr, payload, SkipCRC)},
		{"PUB to handle", ClientToServer, false, AppendPub(nil, h.String(), "", []byte("+ACK"), NoCRC)},
		{"ACK", ClientToServer, false, AppendAck(nil, h, h, h)},
		{"MSG", ServerToClient, false, AppendMsg(nil, "orders", "1", "", payload, NoCRC)},
		{"MSG handle crc", ServerToClient, true, AppendMsg(nil, "orders", "0", h.String(), payload, ComputeCRC)},
		{"HMSG crc", ServerToClient, true, AppendHMsg(nil, "orders", "1", "", hdr, payload, ComputeCRC)},
		{"+OK confirm", ServerToClient, false, AppendConfirm(nil, Position{Partition: 1, Seq: 2})},
	}
	for _, tc := range tests {
		p := NewParser(tc.dir, Limits{})
		p.SetCRC(tc.crc)
		frames := 0
		var handler Handler = HandlerFunc(func(c *Command) error {
			frames++
			if c.Op == OpPub && IsHandleSubject(c.Subject) {
				if _, err := ParseHandle(c.Subject); err != nil {
					return err
				}
				if _, _, err := ParseAckBody(c.Payload); err != nil {
					return err
				}
			}
			if c.Op == OpOK {
				if _, _, err := ParseConfirm(c.Text); err != nil {
					return err
				}
			}
			return nil
		})
		if _, err := p.Parse(tc.in, handler); err != nil { // warm-up (ACK grows its handle slice once)
			t.Fatalf("%s: %v", tc.name, err)
		}
		n := testing.AllocsPerRun(200, func() {
			if _, err := p.Parse(tc.in, handler); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		})
		if n != 0 || frames < 200 {
			t.Errorf("%s: %v allocations per frame (%d frames)", tc.name, n, frames)
		}
	}
}

func TestEncodeAllocs(t *testing.T) {
	payload := make([]byte, 128)
	hdr := AppendHeader(nil, HeaderKey, "k")
	subj := []byte("orders")
	h := Handle{Topic: 1, Group: 1, Seq: 1, Attempt: 1}
	dst := make([]byte, 0, 1024)
	var reply [MaxHandleLen]byte
	n := testing.AllocsPerRun(200, func() {
		dst = AppendPub(dst[:0], "orders", "", payload, ComputeCRC)
		dst = AppendHPub(dst[:0], subj, "", hdr, payload, SkipCRC)
		dst = AppendMsg(dst[:0], subj, "0", h.Append(reply[:0]), payload, KnownCRC(1))
		dst = AppendHMsg(dst[:0], "orders", "1", "", hdr, payload, NoCRC)
		dst = AppendConfirm(dst[:0], Position{Seq: 9})
		dst = AppendAck(dst[:0], h, h)
		if _, ok := HeaderValue(hdr, HeaderKey); !ok {
			t.Fatal("HeaderValue")
		}
	})
	if n != 0 {
		t.Fatalf("encoders allocate %v times per run", n)
	}
}
