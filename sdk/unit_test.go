package fibril

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		ok   bool
	}{
		{"defaults", nil, true},
		{"token", []Option{WithToken("s3cret")}, true},
		{"empty token", []Option{WithToken("")}, false},
		{"token and user", []Option{WithToken("t"), WithUserPassword("u", "p")}, false},
		{"empty user", []Option{WithUserPassword("", "p")}, false},
		{"zero dial timeout", []Option{WithDialTimeout(0)}, false},
		{"negative request timeout", []Option{WithRequestTimeout(-time.Second)}, false},
		{"heartbeat without pings", []Option{WithHeartbeat(time.Second, 0)}, false},
		{"heartbeat off", []Option{WithHeartbeat(0, 1)}, true},
		{"nil logger", []Option{WithLogger(nil)}, false},
		{"negative window", []Option{WithMaxUnconfirmed(-1)}, false},
		{"no reconnect", []Option{WithoutReconnect()}, true},
		{"bad backoff", []Option{WithReconnect(ReconnectPolicy{InitialDelay: time.Second, MaxDelay: time.Millisecond, Multiplier: 2})}, false},
		{"bad jitter", []Option{WithReconnect(ReconnectPolicy{InitialDelay: 1, MaxDelay: 2, Multiplier: 2, Jitter: 2})}, false},
		{"multiplier below 1", []Option{WithReconnect(ReconnectPolicy{InitialDelay: 1, MaxDelay: 2, Multiplier: 0.5})}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			var err error
			for _, o := range tt.opts {
				if err = o(&cfg); err != nil {
					break
				}
			}
			if err == nil {
				err = cfg.validate()
			}
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestReconnectDelay(t *testing.T) {
	p := ReconnectPolicy{InitialDelay: 10 * time.Millisecond, MaxDelay: 200 * time.Millisecond, Multiplier: 2, Jitter: 0.5}
	for n := range 20 {
		base := min(10*time.Millisecond<<n, 200*time.Millisecond)
		for range 50 {
			d := p.delay(n)
			if d < base/2 || d > base*3/2 {
				t.Fatalf("attempt %d: delay %v outside %v ± 50%%", n, d, base)
			}
		}
	}
}

func TestHeaderRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		h    Header
		ok   bool
	}{
		{"one", Header{"X-A": {"1"}}, true},
		{"multi", Header{"X-A": {"1", "2"}, "B": {"two words"}}, true},
		{"empty value", Header{"X": {""}}, true},
		{"colon in key", Header{"a:b": {"1"}}, false},
		{"space in key", Header{"a b": {"1"}}, false},
		{"newline in value", Header{"a": {"x\r\ny"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := encodeHeader(tt.h)
			if (err == nil) != tt.ok {
				t.Fatalf("encode: %v, want ok=%v", err, tt.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("error %v is not ErrInvalidArgument", err)
				}
				return
			}
			got := parseHeader(b)
			for k, vs := range tt.h {
				if !slices.Equal(got.Values(k), vs) {
					t.Fatalf("%s = %q, want %q (block %q)", k, got.Values(k), vs, b)
				}
			}
		})
	}
	h := Header{"Fibril-Key": {"k"}}
	if h.Get("fibril-key") != "k" || h.Get("missing") != "" {
		t.Fatal("Get is not case-insensitive")
	}
}

// serverStream is what a server might send a CRC-mode client.
var serverStream = "INFO {\"fibril\":1,\"max_payload\":1024}\r\n" +
	"+OK\r\n" +
	"PING\r\n" +
	"MSG orders 0 $F.1.2.0.17.3 5 3610a686\r\nhello\r\n" +
	"HMSG orders 7 $F.1.2.1.18.1 20 25 " + hex8(crcOf("NATS/1.0\r\nX-A: 1\r\n\r\nhello")) + "\r\nNATS/1.0\r\nX-A: 1\r\n\r\nhello\r\n" +
	"MSG orders 7 $F.1.2.0.19.1 5 00000000\r\nhello\r\n" +
	"+OK 3\r\n" +
	"-ERR 'stale_handle ack handle is superseded by a later delivery'\r\n"

func crcOf(s string) uint32 { return crc32.ChecksumIEEE([]byte(s)) }

func hex8(v uint32) string {
	const d = "0123456789abcdef"
	b := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b[i] = d[v&0xf]
		v >>= 4
	}
	return string(b)
}

func readAll(t *testing.T, r io.Reader) []*frame {
	t.Helper()
	fr := newFrameReader(r)
	var out []*frame
	for {
		f, err := fr.next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("after %d frames: %v", len(out), err)
		}
		if f.kind == fOK && len(out) == 1 {
			fr.setCRC(true) // as after CONNECT
		}
		cp := *f // the reader reuses its frame
		cp.text = bytes.Clone(f.text)
		out = append(out, &cp)
	}
}

func TestFrameReader(t *testing.T) {
	for _, name := range []string{"whole", "byte at a time"} {
		t.Run(name, func(t *testing.T) {
			var r io.Reader = strings.NewReader(serverStream)
			if name != "whole" {
				r = iotest.OneByteReader(r)
			}
			fs := readAll(t, r)
			kinds := []frameKind{fInfo, fOK, fPing, fMsg, fMsg, fBadMsg, fOK, fErr}
			if len(fs) != len(kinds) {
				t.Fatalf("%d frames, want %d", len(fs), len(kinds))
			}
			for i, k := range kinds {
				if fs[i].kind != k {
					t.Fatalf("frame %d kind %d, want %d", i, fs[i].kind, k)
				}
			}
			if m := fs[3]; m.sid != 0 || !m.sidOK || string(m.reply) != "$F.1.2.0.17.3" || string(m.data) != "hello" || !m.hasCRC {
				t.Fatalf("MSG decoded as %+v", m)
			}
			if m := fs[4]; m.sid != 7 || parseHeader(m.hdr).Get("X-A") != "1" || string(m.data) != "hello" {
				t.Fatalf("HMSG decoded as %+v", m)
			}
			if b := fs[5]; string(b.reply) != "$F.1.2.0.19.1" || b.sid != 7 || !errors.Is(b.bad, protocol.ErrCRCMismatch) {
				t.Fatalf("corrupt MSG decoded as %+v", b)
			}
			if string(fs[6].text) != "3" || !strings.HasPrefix(fs[7].arg, "stale_handle") {
				t.Fatalf("answers %q %q", fs[6].text, fs[7].arg)
			}
		})
	}
}

func TestFrameReaderFatal(t *testing.T) {
	for _, in := range []string{
		"MSG a 1 5\r\nhelloXX",    // body not followed by CRLF
		"BOGUS\r\n",               // not a server verb
		"MSG a 1 99999999999\r\n", // over max payload
		"PUB a 1\r\nx\r\n",        // a client verb
	} {
		fr := newFrameReader(strings.NewReader(in))
		_, err := fr.next()
		if err == nil || err == io.EOF {
			t.Errorf("%q: err = %v, want a protocol error", in, err)
		}
	}
}

func FuzzFrameReader(f *testing.F) {
	f.Add([]byte(serverStream), true)
	f.Add([]byte("MSG a 1 5\r\nhello\r\n"), false)
	f.Add([]byte("HMSG a 1 r 12 14 -\r\nNATS/1.0\r\n\r\nhi\r\n"), true)
	f.Fuzz(func(t *testing.T, in []byte, crc bool) {
		fr := newFrameReader(bytes.NewReader(in))
		fr.setCRC(crc)
		for range 1000 {
			f, err := fr.next()
			if err != nil {
				return
			}
			if f == nil {
				t.Fatal("nil frame without error")
			}
			if f.kind == fMsg && crc && !f.hasCRC {
				t.Fatal("MSG in CRC mode without a verified checksum")
			}
		}
	})
}

func TestEverySpecCodeHasASentinel(t *testing.T) {
	have := map[protocol.Code]bool{}
	for _, e := range codeSentinels() {
		have[e.Code] = true
	}
	for _, c := range protocol.Codes() {
		if !have[c] {
			t.Errorf("code %s has no exported sentinel", c)
		}
		e := protocol.ParseErrText([]byte(string(c) + " " + c.Spec().Text + ": detail"))
		var target *Error
		if !errors.As(error(e), &target) || target.Code != c {
			t.Errorf("-ERR with code %s parsed as %v", c, e)
		}
	}
}

func TestParseOKPosition(t *testing.T) {
	tests := []struct {
		in   string
		want Position
		ok   bool
	}{
		{"0:1", Position{Seq: 1, Stored: true}, true},
		{"3:18446744073709551615", Position{Partition: 3, Seq: 18446744073709551615, Stored: true}, true},
		{"3:7 duplicate", Position{Partition: 3, Seq: 7, Stored: true, Duplicate: true}, true},
		{"-", Position{}, true},
		{"1", Position{}, false},
		{"a:b", Position{}, false},
	}
	for _, tt := range tests {
		got, err := parseOKPosition([]byte(tt.in))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseOKPosition(%q) = %v, %v", tt.in, got, err)
		}
	}
}

// countingReader counts Read calls; each returns as much as fits.
type countingReader struct {
	r     io.Reader
	calls int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.calls++
	return c.r.Read(p)
}

// TestFrameReaderReadsInLargeChunks: 100 deliveries of 1 KiB that are all
// there take two reads (the data, then EOF), not one per 32 KiB (the old
// buffer took five), and every delivery comes out whole.
func TestFrameReaderReadsInLargeChunks(t *testing.T) {
	var stream bytes.Buffer
	body := bytes.Repeat([]byte("z"), 1024)
	for i := range 100 {
		stream.WriteString("MSG orders 0 $F.1.2.0." + strings.Repeat("1", 1+i%3) + ".1 1024\r\n")
		stream.Write(body)
		stream.WriteString("\r\n")
	}
	cr := &countingReader{r: bytes.NewReader(stream.Bytes())}
	fr := newFrameReader(cr)
	for i := range 100 {
		f, err := fr.next()
		if err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
		if f.kind != fMsg || !bytes.Equal(f.data, body) {
			t.Fatalf("delivery %d: kind %d, %d bytes", i, f.kind, len(f.data))
		}
	}
	if _, err := fr.next(); err != io.EOF {
		t.Fatalf("after the stream: %v, want EOF", err)
	}
	if cr.calls > 2 {
		t.Fatalf("%d reads for %d bytes", cr.calls, stream.Len())
	}
}
