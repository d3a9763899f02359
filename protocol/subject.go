package protocol

// This file implements SPEC.md section 6 beyond syntax: wildcard matching,
// filter overlap and the reserved name spaces. Callers validate subjects with
// CheckSubject first; these functions assume valid input and never allocate.

// DLQPrefix starts the name of every dead-letter topic: $DLQ.<topic>.<group>.
const DLQPrefix = "$DLQ."

// InboxPrefix starts request/reply inbox subjects, which never auto-create a
// topic.
const InboxPrefix = "_INBOX."

// DeadLetterTopic returns the default dead-letter topic of a group.
func DeadLetterTopic(topic, group string) string { return DLQPrefix + topic + "." + group }

// IsReservedSubject reports whether subject is in the $ space reserved to
// the server (ack handles, dead-letter topics).
func IsReservedSubject(subject []byte) bool { return len(subject) > 0 && subject[0] == '$' }

// IsInboxSubject reports whether subject is a request/reply inbox (_INBOX.>).
func IsInboxSubject(subject []byte) bool { return hasPrefix(subject, InboxPrefix) }

// AutoCreatable reports whether a publish to subject may auto-create a topic
// (SPEC.md 7.4): not an inbox, not reserved.
func AutoCreatable(subject []byte) bool {
	return !IsInboxSubject(subject) && !IsReservedSubject(subject)
}

// nextSubjectToken splits the first token off s; rest is nil after the last.
func nextSubjectToken(s []byte) (tok, rest []byte, more bool) {
	for i, c := range s {
		if c == '.' {
			return s[:i], s[i+1:], true
		}
	}
	return s, nil, false
}

// MatchSubject reports whether the literal subject matches filter, which may
// hold wildcards: '*' matches one token, '>' one or more trailing tokens.
func MatchSubject(filter, subject []byte) bool {
	f, s := filter, subject
	fMore, sMore := len(f) > 0, len(s) > 0
	for fMore && sMore {
		var ft, st []byte
		ft, f, fMore = nextSubjectToken(f)
		st, s, sMore = nextSubjectToken(s)
		if len(ft) == 1 && ft[0] == '>' {
			return true
		}
		if !(len(ft) == 1 && ft[0] == '*') && string(ft) != string(st) {
			return false
		}
	}
	return !fMore && !sMore
}

// FiltersOverlap reports whether some literal subject matches both filters
// (either may hold wildcards). Topic filters of different topics must not
// overlap (SPEC.md 10.1).
func FiltersOverlap(a, b []byte) bool {
	aMore, bMore := len(a) > 0, len(b) > 0
	for aMore && bMore {
		var at, bt []byte
		at, a, aMore = nextSubjectToken(a)
		bt, b, bMore = nextSubjectToken(b)
		if isGT(at) || isGT(bt) {
			return true
		}
		if !isStar(at) && !isStar(bt) && string(at) != string(bt) {
			return false
		}
	}
	return !aMore && !bMore
}

func isGT(tok []byte) bool   { return len(tok) == 1 && tok[0] == '>' }
func isStar(tok []byte) bool { return len(tok) == 1 && tok[0] == '*' }
