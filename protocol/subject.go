package protocol

import "github.com/fibrilmq/fibril/wire"

// This file implements SPEC.md section 6 beyond syntax: wildcard matching,
// filter overlap and the reserved name spaces. The rules live in package
// wire, shared with the broker and the server; these are the protocol's
// names for them. Callers validate subjects with CheckSubject first; these
// functions assume valid input and never allocate.

// DLQPrefix starts the name of every dead-letter topic: $DLQ.<topic>.<group>.
const DLQPrefix = wire.DLQPrefix

// InboxPrefix starts request/reply inbox subjects, which never auto-create a
// topic.
const InboxPrefix = wire.InboxPrefix

// DeadLetterTopic returns the default dead-letter topic of a group.
func DeadLetterTopic(topic, group string) string { return wire.DeadLetterTopic(topic, group) }

// IsReservedSubject reports whether subject is in the $ space reserved to
// the server (ack handles, dead-letter topics).
func IsReservedSubject(subject []byte) bool { return wire.IsReserved(subject) }

// IsInboxSubject reports whether subject is a request/reply inbox (_INBOX.>).
func IsInboxSubject(subject []byte) bool { return wire.IsInbox(subject) }

// AutoCreatable reports whether a publish to subject may auto-create a topic
// (SPEC.md 7.4): not an inbox, not reserved.
func AutoCreatable(subject []byte) bool {
	return !IsInboxSubject(subject) && !IsReservedSubject(subject)
}

// MatchSubject reports whether the literal subject matches filter, which may
// hold wildcards: '*' matches one token, '>' one or more trailing tokens.
func MatchSubject(filter, subject []byte) bool { return wire.Match(filter, subject) }

// FiltersOverlap reports whether some literal subject matches both filters
// (either may hold wildcards). Topic filters of different topics must not
// overlap (SPEC.md 10.1).
func FiltersOverlap(a, b []byte) bool { return wire.Overlap(a, b) }
