package server

import (
	"strings"
	"testing"

	"github.com/fibrilmq/fibril/server/access"
)

// TestSublistRefusesPartialWildcard: the server's own subject check took
// "a*" (and "a.b>") as a literal token, as NATS does, while the parser, the
// broker and SPEC.md 6 refuse a wildcard that is not a whole token. A
// permission filter "orders*" or an AutoCreate filter "jobs*" was thus
// accepted at start and then matched only the literal subject "orders*".
// validFilter is now wire.CheckSubject, so such options are refused.
func TestSublistRefusesPartialWildcard(t *testing.T) {
	for _, s := range []string{"a*", "a.b>", "a.>b", "*a.b", "a\x01", "a\x7f"} {
		if validFilter(s) || validSubject(s) {
			t.Errorf("%q accepted as a filter or subject", s)
		}
	}
	for _, s := range []string{"a.*", "a.>", "*", ">"} {
		if !validFilter(s) || validSubject(s) {
			t.Errorf("%q: validFilter %v, validSubject %v", s, validFilter(s), validSubject(s))
		}
	}
	o := DefaultOptions()
	o.AutoCreate = []string{"jobs*"}
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "jobs*") {
		t.Errorf("AutoCreate jobs*: validate = %v", err)
	}
	o = DefaultOptions()
	o.Users = []User{{Name: "app", PasswordHash: "$2a$10$x", Permissions: Permissions{Publish: access.Rule{Allow: []string{"orders*"}}}}}
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "orders*") {
		t.Errorf("permission filter orders*: validate = %v", err)
	}
}

// TestSublistMatch checks insertion, matching and pruning of the trie
// against wire's matcher.
func TestSublistMatch(t *testing.T) {
	sl := newSublist()
	filters := []string{"a", "a.b", "a.*", "a.>", "*.b", ">", "a.b.c", "*.*.c"}
	subs := make([]*subscription, len(filters))
	for i, f := range filters {
		subs[i] = &subscription{subject: f, sid: f}
		sl.insert(subs[i])
	}
	for _, subject := range []string{"a", "b", "a.b", "x.b", "a.b.c", "q.r.c", "a.b.c.d"} {
		got := map[string]bool{}
		for _, s := range sl.match(subject, nil) {
			got[s.subject] = true
		}
		for _, f := range filters {
			if want := matchRef(f, subject); got[f] != want {
				t.Errorf("match(%q): filter %q got %v, want %v", subject, f, got[f], want)
			}
		}
	}
	for _, s := range subs {
		if !sl.remove(s) {
			t.Fatalf("remove %q", s.subject)
		}
	}
	if sl.count != 0 || !sl.root.empty() {
		t.Fatalf("trie not pruned: count %d", sl.count)
	}
}

func matchRef(filter, subject string) bool { return access.Matches(filter, subject) }
