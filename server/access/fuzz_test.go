package access

import (
	"strings"
	"testing"
)

// FuzzFilterAlgebra checks Covers, Overlap and Matches against
// enumeration for filters of up to four tokens over at most four distinct
// literal tokens: every subject over those tokens and one fresh one, up to
// one token longer than the longer filter, tells them apart if anything
// does.
func FuzzFilterAlgebra(f *testing.F) {
	for _, seed := range [][2]string{
		{"a.>", "a.*"}, {"*.b", "a.*"}, {">", "a"}, {"a.*.>", "a.>"}, {"x.y", "x.y"}, {"a.b.c", "a.*.c"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		toks := map[string]bool{"zz": true}
		depth := 0
		for _, flt := range []string{a, b} {
			parts := strings.Split(flt, ".")
			if len(parts) > 4 || !validTestFilter(parts) {
				return
			}
			depth = max(depth, len(parts))
			for _, p := range parts {
				if p != "*" && p != ">" {
					toks[p] = true
				}
			}
		}
		if len(toks) > 5 {
			return
		}
		var alphabet []string
		for tk := range toks {
			alphabet = append(alphabet, tk)
		}
		cover, overlap := true, false
		var walk func(prefix []string)
		walk = func(prefix []string) {
			if len(prefix) > 0 {
				s := strings.Join(prefix, ".")
				ma, mb := Matches(a, s), Matches(b, s)
				if ma != tokMatch(strings.Split(a, "."), prefix) {
					t.Fatalf("Matches(%q, %q) = %v", a, s, ma)
				}
				if mb && !ma {
					cover = false
				}
				if ma && mb {
					overlap = true
				}
			}
			if len(prefix) == depth+1 {
				return
			}
			for _, tk := range alphabet {
				walk(append(prefix[:len(prefix):len(prefix)], tk))
			}
		}
		walk(nil)
		if got := Covers(a, b); got != cover {
			t.Errorf("Covers(%q, %q) = %v, enumeration says %v", a, b, got, cover)
		}
		if got := Overlap(a, b); got != overlap {
			t.Errorf("Overlap(%q, %q) = %v, enumeration says %v", a, b, got, overlap)
		}
	})
}

// validTestFilter: non-empty tokens of letters, '*', or a final '>'.
func validTestFilter(parts []string) bool {
	for i, p := range parts {
		switch {
		case p == "*":
		case p == ">":
			if i != len(parts)-1 {
				return false
			}
		case p == "" || len(p) > 3:
			return false
		default:
			for _, c := range p {
				if c < 'a' || c > 'z' {
					return false
				}
			}
		}
	}
	return true
}

// tokMatch is a second, recursive matcher: '*' takes one token, '>' one
// or more trailing ones.
func tokMatch(f, s []string) bool {
	switch {
	case len(f) == 0:
		return len(s) == 0
	case f[0] == ">":
		return len(s) > 0
	case len(s) == 0 || (f[0] != "*" && f[0] != s[0]):
		return false
	}
	return tokMatch(f[1:], s[1:])
}
