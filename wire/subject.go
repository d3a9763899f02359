package wire

// This file implements SPEC.md section 6: the syntax of subjects and
// filters, wildcard matching, overlap and cover, and the reserved name
// spaces.

// Fault says why a subject is not valid; NoFault (0) means it is.
type Fault uint8

// The faults CheckSubject reports, in the order it finds them.
const (
	NoFault         Fault = iota
	Empty                 // the subject is empty
	EmptyToken            // leading, trailing or double '.'
	BadByte               // a space, a control character or DEL
	BadUTF8               // bytes >= 0x80 that are not valid UTF-8
	PartialWildcard       // '*' or '>' inside a longer token ("a*", "a.>b")
	GTNotLast             // a '>' token that is not the last one
	Wildcard              // a '*' or '>' token where wildcards are not allowed
)

// String returns a short English description of f.
func (f Fault) String() string {
	switch f {
	case NoFault:
		return "valid"
	case Empty:
		return "empty subject"
	case EmptyToken:
		return "empty token"
	case BadByte:
		return "white space or a control character"
	case BadUTF8:
		return "not valid UTF-8"
	case PartialWildcard:
		return "wildcard inside a token"
	case GTNotLast:
		return "'>' must be the last token"
	case Wildcard:
		return "wildcard not allowed"
	}
	return "Fault(?)"
}

// CheckSubject reports whether s is a valid subject (SPEC.md 6): non-empty
// tokens separated by '.', bytes 0x21-0x7e or >= 0x80, the latter only as
// valid UTF-8 (names round-trip through JSON byte for byte), '*' and '>'
// only as whole tokens and '>' only last. With wildcards false a '*' or '>'
// token is the fault Wildcard, reported only when nothing else is wrong. It
// returns NoFault or the first fault found; it does not allocate.
func CheckSubject[T Text](s T, wildcards bool) Fault {
	if len(s) == 0 {
		return Empty
	}
	wild := false
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			c := s[i]
			if c <= ' ' || c == 0x7f {
				return BadByte
			}
			if c >= 0x80 {
				n := utf8Len(s, i)
				if n == 0 {
					return BadUTF8
				}
				i += n - 1
				continue
			}
			if c != '.' {
				continue
			}
		}
		tok := s[start:i]
		switch {
		case len(tok) == 0:
			return EmptyToken
		case isStar(tok):
			wild = true
		case isGT(tok):
			if i != len(s) {
				return GTNotLast
			}
			wild = true
		default:
			for j := 0; j < len(tok); j++ {
				if tok[j] == '*' || tok[j] == '>' {
					return PartialWildcard
				}
			}
		}
		start = i + 1
	}
	if wild && !wildcards {
		return Wildcard
	}
	return NoFault
}

// ValidSubject reports whether s is a valid literal subject (no wildcards).
func ValidSubject[T Text](s T) bool { return CheckSubject(s, false) == NoFault }

// ValidFilter reports whether s is a valid filter (wildcards allowed).
func ValidFilter[T Text](s T) bool { return CheckSubject(s, true) == NoFault }

// utf8Len returns the length of the valid UTF-8 sequence starting at s[i]
// (a byte >= 0x80), or 0 when there is none. It follows the table of
// RFC 3629 section 4 (no overlong forms, no surrogates, nothing above
// U+10FFFF), as unicode/utf8 does, without converting s.
func utf8Len[T Text](s T, i int) int {
	c := s[i]
	lo, hi := byte(0x80), byte(0xbf)
	var n int
	switch {
	case c >= 0xc2 && c <= 0xdf:
		n = 2
	case c == 0xe0:
		n, lo = 3, 0xa0
	case c >= 0xe1 && c <= 0xec, c == 0xee, c == 0xef:
		n = 3
	case c == 0xed:
		n, hi = 3, 0x9f
	case c == 0xf0:
		n, lo = 4, 0x90
	case c >= 0xf1 && c <= 0xf3:
		n = 4
	case c == 0xf4:
		n, hi = 4, 0x8f
	default:
		return 0
	}
	if i+n > len(s) {
		return 0
	}
	if b := s[i+1]; b < lo || b > hi {
		return 0
	}
	for j := i + 2; j < i+n; j++ {
		if b := s[j]; b < 0x80 || b > 0xbf {
			return 0
		}
	}
	return n
}

// Cut splits the first token off s: tok is s up to the first '.', rest what
// follows it, and more reports whether there was a '.'.
func Cut[T Text](s T) (tok, rest T, more bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return s[:i], s[i+1:], true
		}
	}
	return s, s[len(s):], false
}

// Match reports whether the literal subject matches filter: '*' matches one
// token, '>' one or more trailing tokens. Both must be valid (CheckSubject);
// it does not allocate.
func Match[T Text](filter, subject T) bool {
	f, s := filter, subject
	fMore, sMore := len(f) > 0, len(s) > 0
	for fMore && sMore {
		var ft, st T
		ft, f, fMore = Cut(f)
		st, s, sMore = Cut(s)
		if isGT(ft) {
			return true
		}
		if !isStar(ft) && !equal(ft, st) {
			return false
		}
	}
	return !fMore && !sMore
}

// Overlap reports whether some literal subject matches both filters (either
// may hold wildcards). Both must be valid.
func Overlap[T Text](a, b T) bool {
	aMore, bMore := len(a) > 0, len(b) > 0
	for aMore && bMore {
		var at, bt T
		at, a, aMore = Cut(a)
		bt, b, bMore = Cut(b)
		if isGT(at) || isGT(bt) {
			return true // both have a token here; '>' takes it and the rest
		}
		if !isStar(at) && !isStar(bt) && !equal(at, bt) {
			return false
		}
	}
	return !aMore && !bMore
}

// Covers reports whether every subject matched by filter b is also matched
// by filter a. Both must be valid.
func Covers[T Text](a, b T) bool {
	aMore, bMore := len(a) > 0, len(b) > 0
	for aMore && bMore {
		var at, bt T
		at, a, aMore = Cut(a)
		bt, b, bMore = Cut(b)
		switch {
		case isGT(at):
			return true
		case isGT(bt):
			return false
		case isStar(at):
		case isStar(bt) || !equal(at, bt):
			return false
		}
	}
	return !aMore && !bMore
}

func isGT[T Text](tok T) bool   { return len(tok) == 1 && tok[0] == '>' }
func isStar[T Text](tok T) bool { return len(tok) == 1 && tok[0] == '*' }

func equal[T Text](a, b T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func hasPrefix[T Text](s T, p string) bool {
	if len(s) < len(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		if s[i] != p[i] {
			return false
		}
	}
	return true
}

// ReservedPrefix starts every subject reserved to the server: ack handles
// (HandlePrefix) and dead-letter topics (DLQPrefix). Clients may not create
// topics there or publish there except to settle a handle (SPEC.md 6).
const ReservedPrefix = "$"

// DLQPrefix starts the name of every dead-letter topic: $DLQ.<topic>.<group>.
const DLQPrefix = "$DLQ."

// InboxPrefix starts request/reply inbox subjects, which never auto-create a
// topic.
const InboxPrefix = "_INBOX."

// IsReserved reports whether subject is in the "$" space reserved to the
// server.
func IsReserved[T Text](subject T) bool { return hasPrefix(subject, ReservedPrefix) }

// IsInbox reports whether subject is a request/reply inbox (_INBOX.>).
func IsInbox[T Text](subject T) bool { return hasPrefix(subject, InboxPrefix) }

// DeadLetterTopic returns the default dead-letter topic of a group.
func DeadLetterTopic(topic, group string) string { return DLQPrefix + topic + "." + group }
