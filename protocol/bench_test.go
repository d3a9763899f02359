package protocol

import (
	"bytes"
	"testing"
)

// countHandler counts frames so the benchmarks measure the parser, not a
// closure allocation.
type countHandler struct{ n, bytes int }

func (h *countHandler) HandleCommand(c *Command) error {
	h.n++
	h.bytes += len(c.Payload)
	return nil
}

// benchParse parses a buffer of frames frames repeatedly and reports
// ns/frame via b.N frames.
func benchParse(b *testing.B, dir Direction, crc bool, frame []byte) {
	const perBuf = 64
	buf := bytes.Repeat(frame, perBuf)
	p := NewParser(dir, Limits{})
	p.SetCRC(crc)
	h := &countHandler{}
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += perBuf {
		n, err := p.Parse(buf, h)
		if err != nil || n != len(buf) {
			b.Fatalf("Parse = %d, %v", n, err)
		}
	}
	if h.n == 0 {
		b.Fatal("no frames parsed")
	}
}

func BenchmarkParsePub(b *testing.B) {
	benchParse(b, ClientToServer, false, AppendPub(nil, "orders.eu.new", "", make([]byte, 128), NoCRC))
}

func BenchmarkParsePubReplyCRC(b *testing.B) {
	benchParse(b, ClientToServer, true, AppendPub(nil, "orders.eu.new", "_INBOX.abc.1", make([]byte, 128), ComputeCRC))
}

func BenchmarkParseHPub(b *testing.B) {
	hdr := AppendHeader(nil, HeaderKey, "cust-42")
	benchParse(b, ClientToServer, false, AppendHPub(nil, "orders", "", hdr, make([]byte, 128), NoCRC))
}

func BenchmarkParseMsg(b *testing.B) {
	benchParse(b, ServerToClient, false, AppendMsg(nil, "orders.eu.new", "12", "", make([]byte, 128), NoCRC))
}

func BenchmarkParseMsgHandleCRC(b *testing.B) {
	h := Handle{Topic: 3, Group: 7, Partition: 2, Seq: 123456789, Attempt: 1}
	benchParse(b, ServerToClient, true, AppendMsg(nil, "orders.eu.new", "0", h.String(), make([]byte, 128), ComputeCRC))
}

func BenchmarkParseAck(b *testing.B) {
	h := Handle{Topic: 3, Group: 7, Partition: 2, Seq: 123456789, Attempt: 1}
	benchParse(b, ClientToServer, false, AppendAck(nil, h, h, h, h))
}

func BenchmarkAppendMsg(b *testing.B) {
	payload := make([]byte, 128)
	subj := []byte("orders.eu.new")
	h := Handle{Topic: 3, Group: 7, Partition: 2, Seq: 123456789, Attempt: 1}
	var reply [MaxHandleLen]byte
	dst := make([]byte, 0, 4096)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for i := 0; i < b.N; i++ {
		dst = AppendMsg(dst[:0], subj, "0", h.Append(reply[:0]), payload, KnownCRC(0xdeadbeef))
	}
}

func BenchmarkAppendPub(b *testing.B) {
	payload := make([]byte, 128)
	dst := make([]byte, 0, 4096)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for i := 0; i < b.N; i++ {
		dst = AppendPub(dst[:0], "orders.eu.new", "", payload, ComputeCRC)
	}
}
