package broker

// Subjects, filters and topic names (SPEC.md 6). The rules are package
// wire's, shared with the parser and the server; this file only turns a
// wire.Fault into ErrInvalid with the name in the message.

import (
	"fmt"

	"github.com/fibrilmq/fibril/wire"
)

// validFilter checks a subject filter: dot-separated non-empty tokens of
// valid UTF-8 without spaces or control characters; "*" matches one token,
// ">" (last token only) one or more.
func validFilter(f string) error {
	return subjectError(f, wire.CheckSubject(f, true))
}

// subjectError returns nil for wire.NoFault, else an error wrapping
// ErrInvalid that names s and the fault.
func subjectError(s string, fault wire.Fault) error {
	switch fault {
	case wire.NoFault:
		return nil
	case wire.Empty:
		return fmt.Errorf("%w: empty subject", ErrInvalid)
	case wire.BadUTF8:
		// The catalog keeps names as JSON, which turns invalid UTF-8
		// into U+FFFD: two such names would merge after a restart.
		return fmt.Errorf("%w: subject %q is not valid UTF-8", ErrInvalid, s)
	case wire.Wildcard:
		return fmt.Errorf("%w: topic name %q has a wildcard", ErrInvalid, s)
	}
	return fmt.Errorf("%w: subject %q: %s", ErrInvalid, s, fault)
}

// validTopicName checks a topic name: a subject without wildcards. Names in
// the reserved "$" space are allowed only when internal is true.
func validTopicName(name TopicName, internal bool) error {
	s := string(name)
	if err := subjectError(s, wire.CheckSubject(s, false)); err != nil {
		return err
	}
	if !internal && wire.IsReserved(s) {
		return fmt.Errorf("%w: topic name %q is in the reserved $ space", ErrInvalid, s)
	}
	return nil
}

// subjectMatches reports whether a literal subject matches a filter.
func subjectMatches(filter, subject string) bool { return wire.Match(filter, subject) }

// filtersOverlap reports whether some subject matches both filters.
func filtersOverlap(a, b string) bool { return wire.Overlap(a, b) }
