// Package access decides what an authenticated identity may do: publish,
// subscribe, consume, settle and manage topics on the wire (SPEC.md 6.1),
// and which admin HTTP endpoints it may use. It is the one owner of those
// decisions; the wire handlers in package server and the HTTP handlers in
// server/admin ask it and enforce the answer.
//
// What it owns: the user configuration's permission types (allow/deny
// lists of subject filters for publish and consume, a role), the subject
// filter algebra they need (match, cover, overlap; the rules themselves
// are package wire's), and the rules that turn
// them into decisions about subjects, topics (a name and its capture
// filters), dead-letter targets and admin actions.
//
// What it must never do: look at sockets, the engine or the disk (callers
// pass what a decision needs: a subject, a topic's name and filters), keep
// state between calls, or log. Decisions are pure functions of the
// Identity and their arguments, so they are safe for concurrent use.
//
// Caveats: a decision is taken when the command arrives. Rights are fixed
// at login (the configuration is read once at start), and what a group or
// topic was created with (its filters, its dead-letter target) is checked at
// creation only: a later REJECT into an accepted dead-letter target is not
// checked again.
package access
