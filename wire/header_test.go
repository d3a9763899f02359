package wire

import (
	"strings"
	"testing"
)

func TestHeaderHelpers(t *testing.T) {
	b := AppendHeader(nil, HeaderReason, "max_deliveries", HeaderSeq, "2", "Empty")
	want := "NATS/1.0\r\nFibril-Reason: max_deliveries\r\nFibril-Seq: 2\r\nEmpty: \r\n\r\n"
	if string(b) != want {
		t.Fatalf("AppendHeader = %q", b)
	}
	if !ValidHeader(b) {
		t.Fatal("AppendHeader output is not a valid block")
	}
	if v, ok := HeaderValue(b, "fibril-seq"); !ok || string(v) != "2" {
		t.Fatalf("HeaderValue = %q, %v", v, ok)
	}
	if v, ok := HeaderValue(b, "Empty"); !ok || len(v) != 0 {
		t.Fatalf("HeaderValue(Empty) = %q, %v", v, ok)
	}
	if _, ok := HeaderValue(b, "NATS/1.0"); ok {
		t.Fatal("the status line is not a field")
	}
	if _, ok := HeaderValue([]byte("NATS/1.0\r\nbroken line\r\n\r\n"), "broken line"); ok {
		t.Fatal("a line without colon is not a field")
	}
	if _, ok := HeaderValue([]byte("HTTP/1.1\r\nA: b\r\n\r\n"), "A"); ok {
		t.Fatal("a block without NATS/1.0 has no fields")
	}
	if _, ok := HeaderValue([]byte("NATS/1.0\r\n\r\nA: b\r\n"), "A"); ok {
		t.Fatal("a line after the empty line is not a field")
	}
	if v, ok := HeaderValue([]byte("NATS/1.0 503\r\n  Spaced  :  v w \r\n\r\n"), "spaced"); !ok || string(v) != "v w" {
		t.Fatalf("HeaderValue trims spaces: %q, %v", v, ok)
	}
	var keys []string
	RangeHeader(b, func(k, v []byte) bool { keys = append(keys, string(k)); return len(keys) < 2 })
	if len(keys) != 2 || keys[0] != HeaderReason {
		t.Fatalf("RangeHeader stopped wrong: %v", keys)
	}
	var lines []string
	RangeHeaderLines([]byte("NATS/1.0\r\nA:1\r\nB: 2\r\n\r\n"), func(l []byte) bool { lines = append(lines, string(l)); return true })
	if strings.Join(lines, "|") != "A:1|B: 2" {
		t.Fatalf("RangeHeaderLines = %q", lines)
	}
}

func TestValidHeader(t *testing.T) {
	for s, want := range map[string]bool{
		"NATS/1.0\r\n\r\n":         true,
		"NATS/1.0 503\r\n\r\n":     true,
		"NATS/1.0\r\nA: b\r\n\r\n": true,
		"NATS/1.0\r\n":             false,
		"NATS/1.0X\r\n\r\n":        false,
		"NATS/1.1\r\n\r\n":         false,
		"NATS/1.0\r\nA: b\r\n":     false,
		"":                         false,
	} {
		if ValidHeader([]byte(s)) != want {
			t.Errorf("ValidHeader(%q) != %v", s, want)
		}
	}
}

func TestHeaderValueAllocs(t *testing.T) {
	b := AppendHeader(nil, HeaderKey, "k1", HeaderMsgID, "m1")
	if n := testing.AllocsPerRun(100, func() { _, _ = HeaderValue(b, HeaderMsgID) }); n != 0 {
		t.Fatalf("HeaderValue allocates %v times", n)
	}
}

// FuzzHeaderValue checks HeaderValue against a reference written with
// strings for blocks built from fuzzed keys and values.
func FuzzHeaderValue(f *testing.F) {
	f.Add("Fibril-Key", "k", "fibril-key")
	f.Add("A", " spaced ", "a")
	f.Add("x:y", "v", "x")
	f.Fuzz(func(t *testing.T, key, value, want string) {
		if strings.ContainsAny(key+value+want, "\r\n") {
			return
		}
		block := AppendHeader(nil, key, value)
		got, ok := HeaderValue(block, want)
		line := key + ": " + value
		rk, rv, rok := strings.Cut(line, ":")
		rk, rv = strings.Trim(rk, " \t"), strings.Trim(rv, " \t")
		refOK := rok && rk != "" && asciiLower(rk) == asciiLower(want)
		if ok != refOK || ok && string(got) != rv {
			t.Fatalf("HeaderValue(%q, %q) = %q, %v; reference %q, %v", block, want, got, ok, rv, refOK)
		}
	})
}

// asciiLower lowers A-Z only, byte by byte (header names fold so).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
