package wire

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckSubject(t *testing.T) {
	tests := []struct {
		s    string
		wild bool
		want Fault
	}{
		{"a", false, NoFault}, {"a.b.c", false, NoFault}, {"caf\u00e9.x", false, NoFault},
		{"$DLQ.x.y", false, NoFault}, {"a-b_c:d", false, NoFault}, {"\U0010FFFF", false, NoFault},
		{"a.*", true, NoFault}, {"a.>", true, NoFault}, {">", true, NoFault}, {"*.*.>", true, NoFault},
		{"", true, Empty},
		{"a..b", true, EmptyToken}, {".a", true, EmptyToken}, {"a.", true, EmptyToken}, {".", true, EmptyToken},
		{"a b", true, BadByte}, {"a\tb", true, BadByte}, {"a\r", true, BadByte}, {"a\n", true, BadByte},
		{"a\x00", true, BadByte}, {"a\x01b", true, BadByte}, {"a\x7f", true, BadByte},
		{"pay.\xff", true, BadUTF8}, {"pay.\xfe", true, BadUTF8}, {"a\xc0\xaf", true, BadUTF8},
		{"\xed\xa0\x80", true, BadUTF8}, {"\xf4\x90\x80\x80", true, BadUTF8}, {"\xe2\x82", true, BadUTF8},
		{"a*", true, PartialWildcard}, {"a.b>", true, PartialWildcard}, {"a.>b", true, PartialWildcard}, {"**", true, PartialWildcard},
		{"a.>.b", true, GTNotLast}, {">.a", true, GTNotLast},
		{"a.*", false, Wildcard}, {">", false, Wildcard}, {"*", false, Wildcard},
		// Every other fault wins over Wildcard.
		{"*.a..b", false, EmptyToken}, {"*.a*", false, PartialWildcard},
	}
	for _, tc := range tests {
		if got := CheckSubject(tc.s, tc.wild); got != tc.want {
			t.Errorf("CheckSubject(%q, %v) = %v, want %v", tc.s, tc.wild, got, tc.want)
		}
		if got := CheckSubject([]byte(tc.s), tc.wild); got != tc.want {
			t.Errorf("CheckSubject([]byte(%q), %v) = %v, want %v", tc.s, tc.wild, got, tc.want)
		}
	}
	if !ValidSubject("a.b") || ValidSubject("a.*") || !ValidFilter("a.*") || ValidFilter("a*") {
		t.Fatal("ValidSubject / ValidFilter")
	}
}

func TestFaultString(t *testing.T) {
	for f := NoFault; f <= Wildcard+1; f++ {
		if f.String() == "" {
			t.Errorf("Fault(%d) has no description", f)
		}
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		filter, subject string
		want            bool
	}{
		{"a", "a", true}, {"a", "b", false}, {"a.b", "a", false}, {"a", "a.b", false},
		{"a.*", "a.b", true}, {"a.*", "a.b.c", false}, {"a.*", "a", false},
		{"a.>", "a.b", true}, {"a.>", "a.b.c", true}, {"a.>", "a", false},
		{">", "a", true}, {">", "a.b", true}, {"*", "a", true}, {"*", "a.b", false},
		{"*.b.>", "x.b.c", true}, {"*.b.>", "x.c.c", false}, {"a.*.c", "a.b.c", true},
		{"orders", "orders", true}, {"ab", "a", false}, {"a", "ab", false},
	}
	for _, tc := range tests {
		if got := Match(tc.filter, tc.subject); got != tc.want {
			t.Errorf("Match(%q, %q) = %v", tc.filter, tc.subject, got)
		}
		if got := Match([]byte(tc.filter), []byte(tc.subject)); got != tc.want {
			t.Errorf("Match([]byte(%q), []byte(%q)) = %v", tc.filter, tc.subject, got)
		}
	}
}

func TestOverlap(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"a", "a", true}, {"a", "b", false}, {"a", "a.>", false}, {"a.>", "a.b", true},
		{"a.*", "a.b", true}, {"a.*", "a.b.c", false}, {"a.*", "*.b", true}, {">", "x.y", true},
		{"a.*.c", "a.b.*", true}, {"a.*.c", "a.b.d", false}, {"*", "a.b", false}, {"a.b", "a.b.c", false},
		{"a.*.c", "a.b.>", true}, {"*.b", "a.c", false},
	}
	for _, tc := range tests {
		if got := Overlap(tc.a, tc.b); got != tc.want {
			t.Errorf("Overlap(%q, %q) = %v", tc.a, tc.b, got)
		}
		if got := Overlap(tc.b, tc.a); got != tc.want {
			t.Errorf("Overlap(%q, %q) = %v (not symmetric)", tc.b, tc.a, got)
		}
	}
}

func TestCovers(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{">", "a.b", true}, {"a.>", "a.*", true}, {"a.*", "a.>", false}, {"a.*", "a.b", true},
		{"a.b", "a.*", false}, {"a", "a", true}, {"a", "a.b", false}, {"a.>", "a", false},
		{"*.b", "a.b", true}, {"a.*.>", "a.>", false}, {"a.>", "a.*.>", true},
	}
	for _, tc := range tests {
		if got := Covers(tc.a, tc.b); got != tc.want {
			t.Errorf("Covers(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

func TestReservedNames(t *testing.T) {
	if DeadLetterTopic("orders", "billing") != "$DLQ.orders.billing" {
		t.Fatal("DeadLetterTopic")
	}
	for s, want := range map[string]bool{"$DLQ.a.b": true, "$F.1": true, "$": true, "a.$": false, "": false} {
		if IsReserved(s) != want {
			t.Errorf("IsReserved(%q) != %v", s, want)
		}
	}
	if !IsInbox("_INBOX.x") || IsInbox("_INBOXES") {
		t.Fatal("IsInbox")
	}
}

func TestSubjectAllocs(t *testing.T) {
	s, f := []byte("orders.eu.caf\u00e9.created"), []byte("orders.*.>")
	n := testing.AllocsPerRun(100, func() {
		_ = CheckSubject(s, false)
		_ = Match(f, s)
		_ = Overlap(f, s)
		_ = Covers(f, s)
	})
	if n != 0 {
		t.Fatalf("subject functions allocate %v times", n)
	}
}

// refCheck is the rule of SPEC.md 6 written the slow, obvious way.
func refCheck(s string, wild bool) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	toks := strings.Split(s, ".")
	hasWild := false
	for i, tok := range toks {
		if tok == "" || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return false
		}
		switch {
		case tok == "*":
			hasWild = true
		case tok == ">":
			if i != len(toks)-1 {
				return false
			}
			hasWild = true
		case strings.ContainsAny(tok, "*>"):
			return false
		}
	}
	return wild || !hasWild
}

// refMatch is a second, recursive matcher: '*' takes one token, '>' one or
// more trailing ones.
func refMatch(f, s []string) bool {
	switch {
	case len(f) == 0:
		return len(s) == 0
	case f[0] == ">":
		return len(s) > 0
	case len(s) == 0 || (f[0] != "*" && f[0] != s[0]):
		return false
	}
	return refMatch(f[1:], s[1:])
}

// FuzzCheckSubject compares CheckSubject with refCheck, and the string and
// []byte forms with each other.
func FuzzCheckSubject(f *testing.F) {
	for _, s := range []string{"a.b", "a.*", "a.>", "a*", "a..b", "caf\u00e9", "pay.\xff", "a\x7f", "\xed\xa0\x80", "\xf0\x9f\x98\x80.>"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, wild bool) {
		got := CheckSubject(s, wild)
		if got != CheckSubject([]byte(s), wild) {
			t.Fatalf("string and []byte disagree on %q", s)
		}
		if (got == NoFault) != refCheck(s, wild) {
			t.Fatalf("CheckSubject(%q, %v) = %v, reference says %v", s, wild, got, refCheck(s, wild))
		}
		if got == Wildcard && (wild || !refCheck(s, true)) {
			t.Fatalf("CheckSubject(%q, %v) = Wildcard for a subject that is not a valid filter", s, wild)
		}
	})
}

// FuzzMatch compares Match with refMatch for valid filters and subjects.
func FuzzMatch(f *testing.F) {
	f.Add("a.*.>", "a.b.c")
	f.Add("a.b", "a.b")
	f.Add(">", "x")
	f.Add("*.b", "a.b.c")
	f.Fuzz(func(t *testing.T, filter, subject string) {
		if !ValidFilter(filter) || !ValidSubject(subject) {
			return
		}
		want := refMatch(strings.Split(filter, "."), strings.Split(subject, "."))
		if got := Match(filter, subject); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", filter, subject, got, want)
		}
		if Match([]byte(filter), []byte(subject)) != want {
			t.Fatalf("Match([]byte) disagrees on %q, %q", filter, subject)
		}
	})
}

// FuzzMatchOverlap checks that a subject matching two filters implies they
// overlap, and that matching agrees with overlap for literal filters.
func FuzzMatchOverlap(f *testing.F) {
	f.Add("a.*", "a.>", "a.b")
	f.Add("*.b", "a.*", "a.b")
	f.Add(">", "x", "x")
	f.Fuzz(func(t *testing.T, a, b, s string) {
		if !ValidFilter(a) || !ValidFilter(b) || !ValidSubject(s) {
			return
		}
		if Match(a, s) && Match(b, s) && !Overlap(a, b) {
			t.Fatalf("%q and %q both match %q but do not overlap", a, b, s)
		}
		if Match(a, s) != Overlap(a, s) {
			t.Fatalf("literal %q: match(%q)=%v overlap=%v", s, a, Match(a, s), Overlap(a, s))
		}
		if Match(s, a) != (s == a) {
			t.Fatalf("literal filter %q vs %q", s, a)
		}
	})
}

// FuzzFilterAlgebra checks Covers, Overlap and Match against enumeration
// for filters of up to four tokens over at most four distinct literal
// tokens: every subject over those tokens and one fresh one, up to one
// token longer than the longer filter, tells them apart if anything does.
func FuzzFilterAlgebra(f *testing.F) {
	for _, seed := range [][2]string{
		{"a.>", "a.*"}, {"*.b", "a.*"}, {">", "a"}, {"a.*.>", "a.>"}, {"x.y", "x.y"}, {"a.b.c", "a.*.c"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		// "fresh" has four letters, so no filter token (three at most) is it.
		toks := map[string]bool{"fresh": true}
		depth := 0
		for _, flt := range []string{a, b} {
			parts := strings.Split(flt, ".")
			if len(parts) > 4 || !smallFilter(parts) {
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
				ma, mb := Match(a, s), Match(b, s)
				if ma != refMatch(strings.Split(a, "."), prefix) {
					t.Fatalf("Match(%q, %q) = %v", a, s, ma)
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

// smallFilter: non-empty tokens of up to three letters, '*', or a final '>'.
func smallFilter(parts []string) bool {
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
