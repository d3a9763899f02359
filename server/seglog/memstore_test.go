package seglog

import (
	"errors"
	"testing"
)

func TestMemStoreTruncateFrontIsExact(t *testing.T) {
	s := NewMemStore()
	for i := 1; i <= 10; i++ {
		if _, err := s.Append([]Entry{entry(i)}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		to        Seq
		wantFirst Seq
	}{
		{0, 1}, {1, 1}, {4, 4}, {3, 4}, {10, 10}, {99, 11},
	}
	for _, tc := range tests {
		if err := s.TruncateFront(tc.to); err != nil {
			t.Fatal(err)
		}
		if f, l := s.Bounds(); f != tc.wantFirst || l != 10 {
			t.Fatalf("TruncateFront(%d): bounds %d,%d; want %d,10", tc.to, f, l, tc.wantFirst)
		}
		if tc.wantFirst > 1 {
			if _, err := s.Read(tc.wantFirst - 1); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Read(%d) after TruncateFront(%d): %v", tc.wantFirst-1, tc.to, err)
			}
		}
	}
}

func TestOptionsValidation(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		ok   bool
	}{
		{"zero", Options{}, true},
		{"small-segment", Options{SegmentSize: 100}, false},
		{"unaligned-segment", Options{SegmentSize: MinSegmentSize + 4}, false},
		{"huge-segment", Options{SegmentSize: MaxSegmentSize + 8}, false},
		{"bad-policy", Options{Policy: 9}, false},
		{"negative-interval", Options{IndexInterval: -1}, false},
		{"sync", Options{Policy: PolicySync, SegmentSize: 1 << 20}, true},
	}
	for _, tc := range tests {
		got, err := tc.opts.withDefaults()
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: %v does not wrap ErrInvalidOptions", tc.name, err)
		}
		if err == nil && (got.SegmentSize == 0 || got.IndexInterval == 0 || got.FS == nil) {
			t.Errorf("%s: defaults not filled: %+v", tc.name, got)
		}
	}
}

func TestParsePolicy(t *testing.T) {
	for _, p := range []Policy{PolicySync, PolicyCaller, PolicyNone} {
		got, err := ParsePolicy(p.String())
		if err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := ParsePolicy("fast"); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("ParsePolicy(fast): %v", err)
	}
}
