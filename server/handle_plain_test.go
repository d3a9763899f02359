package server

import (
	"fmt"
	"hash/crc32"
	"testing"
)

// TestAppendMsgFrames pins the frames fan-out writes now that appendMsg is
// protocol's encoder rather than a second one: MSG and HMSG, with and
// without reply-to and checksum, and HMSG stripped to MSG for a client
// without headers (its checksum then covers the payload only).
func TestAppendMsgFrames(t *testing.T) {
	hdr := "NATS/1.0\r\nA: b\r\n\r\n"
	body := hdr + "hello"
	sumAll := fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(body)))
	sumPayload := fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte("hello")))
	tests := []struct {
		m           pubMsg
		crc, withHd bool
		want        string
	}{
		{pubMsg{subject: "s", body: []byte("hello")}, false, true, "MSG s 7 5\r\nhello\r\n"},
		{pubMsg{subject: "s", reply: "r", body: []byte("hello")}, false, true, "MSG s 7 r 5\r\nhello\r\n"},
		{pubMsg{subject: "s", body: []byte("hello")}, true, true, "MSG s 7 5 " + sumPayload + "\r\nhello\r\n"},
		{pubMsg{subject: "s", hdrLen: len(hdr), body: []byte(body)}, false, true, fmt.Sprintf("HMSG s 7 %d %d\r\n%s\r\n", len(hdr), len(body), body)},
		{pubMsg{subject: "s", reply: "r", hdrLen: len(hdr), body: []byte(body)}, true, true, fmt.Sprintf("HMSG s 7 r %d %d %s\r\n%s\r\n", len(hdr), len(body), sumAll, body)},
		{pubMsg{subject: "s", hdrLen: len(hdr), body: []byte(body)}, false, false, "MSG s 7 5\r\nhello\r\n"},
		{pubMsg{subject: "s", hdrLen: len(hdr), body: []byte(body)}, true, false, "MSG s 7 5 " + sumPayload + "\r\nhello\r\n"},
		{pubMsg{subject: "s", body: nil}, true, true, "MSG s 7 0 00000000\r\n\r\n"},
	}
	for i, tc := range tests {
		if got := string(appendMsg(nil, &tc.m, "7", tc.crc, tc.withHd)); got != tc.want {
			t.Errorf("%d: appendMsg = %q, want %q", i, got, tc.want)
		}
	}
}
