package broker

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// validFilter checks a subject filter: dot-separated non-empty tokens of
// valid UTF-8 without spaces; "*" matches one token, ">" (last token only) one or more.
func validFilter(f string) error {
	if f == "" {
		return fmt.Errorf("%w: empty subject", ErrInvalid)
	}
	if !utf8.ValidString(f) {
		// The catalog keeps names as JSON, which turns invalid UTF-8
		// into U+FFFD: two such names would merge after a restart.
		return fmt.Errorf("%w: subject %q is not valid UTF-8", ErrInvalid, f)
	}
	toks := strings.Split(f, ".")
	for i, t := range toks {
		switch {
		case t == "":
			return fmt.Errorf("%w: subject %q has an empty token", ErrInvalid, f)
		case strings.ContainsAny(t, " \t\r\n"):
			return fmt.Errorf("%w: subject %q has white space", ErrInvalid, f)
		case t == ">" && i != len(toks)-1:
			return fmt.Errorf("%w: subject %q: '>' must be the last token", ErrInvalid, f)
		case t != "*" && t != ">" && strings.ContainsAny(t, "*>"):
			return fmt.Errorf("%w: subject %q: wildcard inside a token", ErrInvalid, f)
		}
	}
	return nil
}

// validTopicName checks a topic name: a subject without wildcards. Names in
// the reserved "$" space are allowed only when internal is true.
func validTopicName(name TopicName, internal bool) error {
	s := string(name)
	if err := validFilter(s); err != nil {
		return err
	}
	if strings.ContainsAny(s, "*>") {
		return fmt.Errorf("%w: topic name %q has a wildcard", ErrInvalid, s)
	}
	if !internal && strings.HasPrefix(s, "$") {
		return fmt.Errorf("%w: topic name %q is in the reserved $ space", ErrInvalid, s)
	}
	return nil
}

// subjectMatches reports whether a literal subject matches a filter.
func subjectMatches(filter, subject string) bool {
	for {
		ft, frest, fmore := strings.Cut(filter, ".")
		st, srest, smore := strings.Cut(subject, ".")
		switch {
		case ft == ">":
			return st != ""
		case ft != "*" && ft != st:
			return false
		case st == "":
			return false
		}
		if !fmore || !smore {
			return fmore == smore
		}
		filter, subject = frest, srest
	}
}

// filtersOverlap reports whether some subject matches both filters.
func filtersOverlap(a, b string) bool {
	for {
		at, arest, amore := strings.Cut(a, ".")
		bt, brest, bmore := strings.Cut(b, ".")
		if at == ">" || bt == ">" {
			return true // both have a token here, and '>' takes it and the rest
		}
		if at != bt && at != "*" && bt != "*" {
			return false
		}
		if !amore || !bmore {
			if amore == bmore {
				return true
			}
			// One ended; even a '>' next in the other needs one more token.
			return false
		}
		a, b = arest, brest
	}
}
