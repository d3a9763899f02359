package server

// The reference model of SPEC.md 6.1 for the permission matrix
// (permmatrix_test.go). It is written from the SPEC's text, not from
// package access: a rule's rights are sets of concrete subjects, found by
// enumerating every subject of a finite universe (the tokens the test uses
// plus one fresh token, up to one token longer than any filter), so
// "covers" and "overlaps" are set inclusion and intersection instead of
// pattern algebra. Over that universe the two agree exactly: a subject that
// tells two filters apart never needs a token neither names nor more than
// one token beyond the longer.

import "strings"

type refRule struct{ allow, deny []string }

type refUser struct {
	name     string
	role     string // "", "monitor" or "admin"
	pub, con refRule
}

type refTopic struct {
	name    string
	filters []string // empty: [name]
}

// refModel decides permissions by enumeration; it remembers each
// decision's answer.
type refModel struct {
	memo map[string]bool
}

func newRefModel() *refModel { return &refModel{memo: map[string]bool{}} }

// universe is every subject over the tokens of words plus one fresh token,
// up to one token longer than the longest word.
func universe(words []string) [][]string {
	toks := map[string]bool{"zzfresh": true}
	depth := 0
	for _, w := range words {
		parts := strings.Split(w, ".")
		depth = max(depth, len(parts))
		for _, p := range parts {
			if p != "*" && p != ">" {
				toks[p] = true
			}
		}
	}
	var out [][]string
	var grow func(prefix []string)
	grow = func(prefix []string) {
		if len(prefix) > 0 {
			out = append(out, prefix)
		}
		if len(prefix) == depth+1 {
			return
		}
		for t := range toks {
			grow(append(append([]string(nil), prefix...), t))
		}
	}
	grow(nil)
	return out
}

// refMatches: '*' takes one token, '>' one or more trailing tokens.
func refMatches(filter, subject []string) bool {
	if len(filter) == 0 {
		return len(subject) == 0
	}
	if filter[0] == ">" {
		return len(subject) >= 1
	}
	if len(subject) == 0 {
		return false
	}
	if filter[0] != "*" && filter[0] != subject[0] {
		return false
	}
	return refMatches(filter[1:], subject[1:])
}

func anyMatches(filters []string, subject []string) bool {
	for _, f := range filters {
		if refMatches(strings.Split(f, "."), subject) {
			return true
		}
	}
	return false
}

// permits: some one allow filter (none given: everything) takes in every
// subject of filter, and no deny filter takes any of them, over the
// universe of the words involved. (One allow filter, not their union:
// allow ["a.*", "a.*.>"] does not grant "a.>", as in NATS.)
func (m *refModel) permits(r refRule, filter string) bool {
	key := strings.Join(r.allow, ",") + "|" + strings.Join(r.deny, ",") + "|" + filter
	if v, ok := m.memo[key]; ok {
		return v
	}
	words := append(append([]string{filter}, r.allow...), r.deny...)
	f := strings.Split(filter, ".")
	var mine [][]string
	for _, subj := range universe(words) {
		if refMatches(f, subj) {
			mine = append(mine, subj)
		}
	}
	ok := true
	for _, subj := range mine {
		ok = ok && !anyMatches(r.deny, subj)
	}
	if ok && len(r.allow) > 0 {
		ok = false
		for _, a := range r.allow {
			all := true
			for _, subj := range mine {
				all = all && anyMatches([]string{a}, subj)
			}
			ok = ok || all
		}
	}
	m.memo[key] = ok
	return ok
}

func (t refTopic) all() []string {
	out := []string{t.name}
	for _, f := range t.filters {
		if f != t.name {
			out = append(out, f)
		}
	}
	return out
}

func (m *refModel) every(r refRule, t refTopic) bool {
	for _, s := range t.all() {
		if !m.permits(r, s) {
			return false
		}
	}
	return true
}

func dollar(s string) bool { return strings.HasPrefix(s, "$") }

// The decisions, one per row of SPEC.md 6.1's tables: true means allowed
// (not refused with permission_denied, reserved_subject or 403).

func (m *refModel) pub(u refUser, subject string) bool {
	return !dollar(subject) && m.permits(u.pub, subject)
}

func (m *refModel) sub(u refUser, filter string) bool { return m.permits(u.con, filter) }

func (m *refModel) consume(u refUser, t refTopic) bool { return m.every(u.con, t) }

func (m *refModel) see(u refUser, t refTopic) bool {
	return m.every(u.con, t) || m.every(u.pub, t)
}

func (m *refModel) create(u refUser, t refTopic) bool {
	for _, s := range t.all() {
		if dollar(s) {
			return false
		}
	}
	return m.every(u.pub, t) && m.every(u.con, t)
}

func (m *refModel) remove(u refUser, t refTopic) bool {
	return m.every(u.pub, t) && m.every(u.con, t)
}

// groupCreate: consume over the topic, and the dead-letter target is the
// default, none, or a topic the user may publish to (or create when it
// does not exist); never another "$" name. existing is nil for a target
// that does not exist.
func (m *refModel) groupCreate(u refUser, t refTopic, group, target string, existing *refTopic) bool {
	if !m.consume(u, t) {
		return false
	}
	switch {
	case target == "" || target == "-" || target == "$DLQ."+t.name+"."+group:
		return true
	case dollar(target):
		return false
	case existing != nil:
		return m.every(u.pub, *existing)
	}
	return m.create(u, refTopic{name: target})
}

// settle: consume over the topic and the same identity the delivery went to.
func (m *refModel) settle(u, holder refUser, t refTopic) bool {
	return m.consume(u, t) && u.name == holder.name
}

// httpAllowed decides an admin endpoint: "view" (a topic's counters),
// "read" (payloads, events), "metrics", "conns", "operate".
func (m *refModel) httpAllowed(u refUser, what string, t *refTopic) bool {
	monitor := u.role == "monitor" || u.role == "admin"
	switch what {
	case "view":
		return monitor || m.see(u, *t)
	case "read":
		return m.consume(u, *t)
	case "metrics":
		return monitor
	case "conns", "operate":
		return u.role == "admin"
	}
	panic("unknown endpoint kind " + what)
}

// refOverlap reports whether some subject matches both filters (by
// enumeration; the random matrix uses it to build topics that do not
// overlap).
func refOverlap(a, b string) bool {
	fa, fb := strings.Split(a, "."), strings.Split(b, ".")
	for _, subj := range universe([]string{a, b}) {
		if refMatches(fa, subj) && refMatches(fb, subj) {
			return true
		}
	}
	return false
}
