package server

import (
	"math/rand/v2"
	"strconv"
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

// TestSublistCacheFollowsChanges: with the match cache in use (every
// subject matched before and after each change), random inserts and
// removes of literal and wildcard filters, in and out of queue groups,
// never leave a stale result: each match equals the reference matcher over
// the subscriptions present, and each queue group is one list.
func TestSublistCacheFollowsChanges(t *testing.T) {
	filters := []string{"a", "a.b", "a.c", "a.*", "a.>", "*.b", ">", "a.b.c", "*.*.c", "b"}
	queues := []string{"", "", "q1", "q2"}
	subjects := []string{"a", "b", "a.b", "a.c", "x.b", "a.b.c", "q.r.c", "a.b.c.d"}
	rng := rand.New(rand.NewPCG(1, 2))
	sl := newSublist()
	present := map[*subscription]bool{}
	var all []*subscription
	for step := range 2000 {
		if len(all) > 0 && rng.IntN(3) == 0 {
			s := all[rng.IntN(len(all))]
			if got := sl.remove(s); got != present[s] {
				t.Fatalf("step %d: remove %q = %v, want %v", step, s.subject, got, present[s])
			}
			delete(present, s)
		} else {
			s := &subscription{subject: filters[rng.IntN(len(filters))], queue: queues[rng.IntN(len(queues))], sid: strconv.Itoa(step)}
			sl.insert(s)
			present[s] = true
			all = append(all, s)
		}
		for _, subject := range subjects {
			r := sl.matchResult(subject)
			got := map[*subscription]bool{}
			for _, s := range r.plain {
				if s.queue != "" {
					t.Fatalf("step %d: %q: queue member %q among the plain", step, subject, s.queue)
				}
				got[s] = true
			}
			for _, q := range r.queues {
				for _, s := range q {
					if s.queue != q[0].queue {
						t.Fatalf("step %d: %q: queue %q mixed with %q", step, subject, s.queue, q[0].queue)
					}
					got[s] = true
				}
			}
			want := 0
			for s := range present {
				if matchRef(s.subject, subject) {
					want++
					if !got[s] {
						t.Fatalf("step %d: match(%q) misses %q (queue %q)", step, subject, s.subject, s.queue)
					}
				}
			}
			if len(got) != want || len(r.all(nil)) != want {
				t.Fatalf("step %d: match(%q) = %d subscriptions, want %d", step, subject, len(r.all(nil)), want)
			}
		}
	}
}

// TestSublistCacheBounded: matching more subjects than the cache holds
// keeps it at slCacheMax entries, and results stay right.
func TestSublistCacheBounded(t *testing.T) {
	sl := newSublist()
	s := &subscription{subject: "a.*", sid: "1"}
	sl.insert(s)
	for i := range 3 * slCacheMax {
		if n := len(sl.match("a."+strconv.Itoa(i), nil)); n != 1 {
			t.Fatalf("match a.%d: %d subscriptions, want 1", i, n)
		}
		if len(sl.cache) > slCacheMax {
			t.Fatalf("cache holds %d subjects, bound %d", len(sl.cache), slCacheMax)
		}
	}
	if n := len(sl.match("b", nil)); n != 0 {
		t.Fatalf("match b: %d subscriptions, want 0", n)
	}
}
