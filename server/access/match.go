package access

import "strings"

// The filter algebra of permissions. Filters and subjects are valid
// (protocol.CheckSubject); '*' matches one token, '>' one or more trailing
// tokens (SPEC.md 6).

// Matches reports whether the literal subject matches filter.
func Matches(filter, subject string) bool {
	for {
		ftok, frest, fmore := strings.Cut(filter, ".")
		stok, srest, smore := strings.Cut(subject, ".")
		switch {
		case ftok == ">":
			return true
		case ftok != "*" && ftok != stok:
			return false
		}
		if !fmore || !smore {
			return fmore == smore
		}
		filter, subject = frest, srest
	}
}

// Covers reports whether every subject matched by filter b is also matched
// by filter a.
func Covers(a, b string) bool {
	for {
		at, arest, amore := strings.Cut(a, ".")
		bt, brest, bmore := strings.Cut(b, ".")
		switch {
		case at == ">":
			return true
		case bt == ">":
			return false
		case at == "*":
		case bt == "*" || at != bt:
			return false
		}
		if !amore || !bmore {
			return amore == bmore
		}
		a, b = arest, brest
	}
}

// Overlap reports whether some subject is matched by both filters.
func Overlap(a, b string) bool {
	for {
		at, arest, amore := strings.Cut(a, ".")
		bt, brest, bmore := strings.Cut(b, ".")
		switch {
		case at == ">" || bt == ">":
			return true
		case at != "*" && bt != "*" && at != bt:
			return false
		}
		if !amore || !bmore {
			return amore == bmore
		}
		a, b = arest, brest
	}
}
