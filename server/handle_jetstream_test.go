package server

import (
	"bytes"
	"testing"

	"github.com/fibrilmq/fibril/server/jsapi"
)

// TestAppendJSMsgMatchesAppendMsg: a pull request's batched deliveries are
// encoded byte for byte as sendTo encodes one message (MSG or HMSG, the
// header dropped for a client without headers, the CRC token when asked).
func TestAppendJSMsgMatchesAppendMsg(t *testing.T) {
	hdr := []byte("NATS/1.0\r\nA: b\r\n\r\n")
	for _, tc := range []struct {
		name           string
		reply          string
		hdr, data      []byte
		crc, withHdrOK bool
	}{
		{"plain", "$JS.ACK.S.C.1.2.3.4.5", nil, []byte("hello"), false, true},
		{"no reply", "", nil, []byte("hello"), false, true},
		{"empty data", "r", nil, nil, false, true},
		{"header", "r", hdr, []byte("x"), false, true},
		{"header dropped", "r", hdr, []byte("x"), false, false},
		{"crc", "r", nil, []byte("hello"), true, true},
		{"crc header", "r", hdr, []byte("hello"), true, true},
		{"crc header dropped", "r", hdr, []byte("hello"), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := append(append([]byte{}, tc.hdr...), tc.data...)
			pm := pubMsg{subject: "bench.x", reply: tc.reply, hdrLen: len(tc.hdr), body: body}
			withHeaders := tc.withHdrOK || len(tc.hdr) == 0
			want := appendMsg(nil, &pm, "7", tc.crc, withHeaders)
			m := jsapi.Msg{Subject: "bench.x", Reply: []byte(tc.reply), Header: tc.hdr, Data: tc.data}
			got := appendJSMsg(nil, "7", &m, tc.crc, withHeaders)
			if !bytes.Equal(got, want) {
				t.Fatalf("appendJSMsg = %q, want %q", got, want)
			}
			if n := jsMsgSize("7", &m); len(got) > n {
				t.Fatalf("frame of %d bytes, jsMsgSize %d", len(got), n)
			}
		})
	}
}

// BenchmarkAppendJSMsg: one 1 KiB delivery of a pull request, encoded
// into a reused buffer (no allocation).
func BenchmarkAppendJSMsg(b *testing.B) {
	m := jsapi.Msg{Subject: "bench.x", Reply: []byte("$JS.ACK.BENCH.bench.1.12345.12345.1764754000000000000.99"), Data: make([]byte, 1024)}
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	b.SetBytes(int64(len(m.Data)))
	for b.Loop() {
		buf = appendJSMsg(buf[:0], "1", &m, false, true)
	}
	if len(buf) == 0 {
		b.Fatal("nothing encoded")
	}
}
