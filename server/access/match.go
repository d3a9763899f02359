package access

import "github.com/fibrilmq/fibril/wire"

// The filter algebra of permissions. Filters and subjects are valid
// (wire.CheckSubject); '*' matches one token, '>' one or more trailing
// tokens (SPEC.md 6). The rules are package wire's, shared with the parser
// and the engine.

// Matches reports whether the literal subject matches filter.
func Matches(filter, subject string) bool { return wire.Match(filter, subject) }

// Covers reports whether every subject matched by filter b is also matched
// by filter a.
func Covers(a, b string) bool { return wire.Covers(a, b) }

// Overlap reports whether some subject is matched by both filters.
func Overlap(a, b string) bool { return wire.Overlap(a, b) }
