package broker

import (
	"errors"
	"testing"
)

func TestParseHandle(t *testing.T) {
	tests := []struct {
		in   string
		want Handle
		ok   bool
	}{
		{"$F.1.2.3.4.5", Handle{1, 2, 3, 4, 5}, true},
		{"$F.4294967295.1.0.18446744073709551615.1", Handle{4294967295, 1, 0, 18446744073709551615, 1}, true},
		{"$F.1.2.3.4", Handle{}, false},
		{"$F.1.2.3.4.5.6", Handle{}, false},
		{"F.1.2.3.4.5", Handle{}, false},
		{"$F.1.2.x.4.5", Handle{}, false},
		{"$F.1..3.4.5", Handle{}, false},
		{"$F.4294967296.1.1.1.1", Handle{}, false},
		{"$F.+1.2.3.4.5", Handle{}, false},
		{"", Handle{}, false},
	}
	for _, tt := range tests {
		got, err := ParseHandle(tt.in)
		if tt.ok != (err == nil) || got != tt.want {
			t.Errorf("ParseHandle(%q) = %+v, %v", tt.in, got, err)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseHandle(%q) error %v does not wrap ErrInvalid", tt.in, err)
		}
		if tt.ok && got.String() != tt.in {
			t.Errorf("String() = %q, want %q", got.String(), tt.in)
		}
	}
}

// TestBrokerParseHandleRefusesNonCanonical: the broker parsed handles with
// strconv, so "$F.01.2.3.4.5" (a leading zero) and zero ids, seq or attempt
// were accepted where the wire refuses them (SPEC.md 9.1: canonical
// decimal; ids, seq and attempt >= 1). Both now use wire.ParseHandle.
func TestBrokerParseHandleRefusesNonCanonical(t *testing.T) {
	for _, s := range []string{"$F.01.2.3.4.5", "$F.1.2.03.4.5", "$F.0.1.0.1.1", "$F.1.0.0.1.1", "$F.1.1.0.0.1", "$F.1.1.0.1.0", "$F.0.0.0.0.0"} {
		if h, err := ParseHandle(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseHandle(%q) = %+v, %v; want ErrInvalid", s, h, err)
		}
	}
}

func FuzzParseHandle(f *testing.F) {
	f.Add("$F.1.2.3.4.5")
	f.Add("$F.0.0.0.0.0")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHandle(s)
		if err != nil {
			return
		}
		h2, err := ParseHandle(h.String())
		if err != nil || h2 != h {
			t.Fatalf("round trip of %q: %+v -> %q -> %+v, %v", s, h, h.String(), h2, err)
		}
	})
}
