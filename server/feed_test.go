package server

import (
	"strconv"
	"testing"
)

// TestSubjectCacheBounded: the publisher's subject cache returns each
// subject's own string whatever was cached before, a string that does not
// alias the borrowed input, and never holds more than subjectCacheMax.
func TestSubjectCacheBounded(t *testing.T) {
	var sc subjectCache
	in := []byte("orders.eu")
	s := sc.get(in)
	in[0] = 'X' // the input buffer is reused for the next read
	if s != "orders.eu" || sc.get([]byte("orders.eu")) != "orders.eu" {
		t.Fatalf("cached %q, want orders.eu", s)
	}
	for i := range 3 * subjectCacheMax {
		want := "s." + strconv.Itoa(i)
		if got := sc.get([]byte(want)); got != want {
			t.Fatalf("get(%q) = %q", want, got)
		}
		if len(sc.m) > subjectCacheMax {
			t.Fatalf("cache holds %d subjects, bound %d", len(sc.m), subjectCacheMax)
		}
	}
}
