package wire

import (
	"strconv"
	"strings"
	"testing"
)

func TestParseHandle(t *testing.T) {
	tests := []struct {
		in   string
		want Handle
		ok   bool
	}{
		{"$F.1.2.3.4.5", Handle{1, 2, 3, 4, 5}, true},
		{"$F.1.1.0.1.1", Handle{1, 1, 0, 1, 1}, true},
		{"$F.18446744073709551615.18446744073709551615.4294967295.18446744073709551615.4294967295",
			Handle{^uint64(0), ^uint64(0), ^uint32(0), ^uint64(0), ^uint32(0)}, true},
		{"$F.1.2.3.4", Handle{}, false},
		{"$F.1.2.3.4.5.6", Handle{}, false},
		{"F.1.2.3.4.5", Handle{}, false},
		{"$F.1.2.x.4.5", Handle{}, false},
		{"$F.1..3.4.5", Handle{}, false},
		{"$F.1.2.3.4.", Handle{}, false},
		{"$F.1.1.4294967296.1.1", Handle{}, false},
		{"$F.1.1.1.1.4294967296", Handle{}, false},
		{"$F.18446744073709551616.1.1.1.1", Handle{}, false},
		{"$F.+1.2.3.4.5", Handle{}, false},
		{"$F.01.2.3.4.5", Handle{}, false},
		{"$F.0.1.0.1.1", Handle{}, false},
		{"$F.1.0.0.1.1", Handle{}, false},
		{"$F.1.1.0.0.1", Handle{}, false},
		{"$F.1.1.0.1.0", Handle{}, false},
		{"$F.", Handle{}, false},
		{"", Handle{}, false},
	}
	for _, tt := range tests {
		got, ok := ParseHandle(tt.in)
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParseHandle(%q) = %+v, %v", tt.in, got, ok)
		}
		if gotb, okb := ParseHandle([]byte(tt.in)); gotb != got || okb != ok {
			t.Errorf("ParseHandle([]byte(%q)) disagrees", tt.in)
		}
		if tt.ok && got.String() != tt.in {
			t.Errorf("String() = %q, want %q", got.String(), tt.in)
		}
		if tt.ok && (len(tt.in) > MaxHandleLen || !ValidSubject(tt.in) || !IsHandle(tt.in)) {
			t.Errorf("%q is not a handle subject within %d bytes", tt.in, MaxHandleLen)
		}
	}
	if (Handle{}).Valid() || IsHandle("$F") {
		t.Fatal("zero handle / short subject")
	}
}

func TestHandleAllocs(t *testing.T) {
	b := []byte("$F.12.34.5.678901.2")
	buf := make([]byte, 0, MaxHandleLen)
	n := testing.AllocsPerRun(100, func() {
		h, _ := ParseHandle(b)
		buf = h.Append(buf[:0])
	})
	if n != 0 {
		t.Fatalf("ParseHandle/Append allocate %v times", n)
	}
}

// refParseHandle parses a handle with strconv and strings.
func refParseHandle(s string) (Handle, bool) {
	rest, ok := strings.CutPrefix(s, HandlePrefix)
	toks := strings.Split(rest, ".")
	if !ok || len(toks) != 5 {
		return Handle{}, false
	}
	var v [5]uint64
	for i, tok := range toks {
		n, err := strconv.ParseUint(tok, 10, []int{64, 64, 32, 64, 32}[i])
		if err != nil || strconv.FormatUint(n, 10) != tok {
			return Handle{}, false
		}
		v[i] = n
	}
	h := Handle{v[0], v[1], uint32(v[2]), v[3], uint32(v[4])}
	if !h.Valid() {
		return Handle{}, false
	}
	return h, true
}

// FuzzParseHandle compares ParseHandle with refParseHandle and checks the
// round trip through String.
func FuzzParseHandle(f *testing.F) {
	f.Add("$F.1.2.3.4.5")
	f.Add("$F.0.0.0.0.0")
	f.Add("$F.01.1.1.1.1")
	f.Add("$F.18446744073709551615.1.4294967295.1.1")
	f.Fuzz(func(t *testing.T, s string) {
		h, ok := ParseHandle(s)
		if rh, rok := refParseHandle(s); rh != h || rok != ok {
			t.Fatalf("ParseHandle(%q) = %+v, %v; reference %+v, %v", s, h, ok, rh, rok)
		}
		if !ok {
			return
		}
		if h.String() != s {
			t.Fatalf("round trip of %q: %+v -> %q", s, h, h.String())
		}
	})
}
