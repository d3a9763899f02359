package access

import (
	"errors"
	"strings"
	"testing"

	"github.com/fibrilmq/fibril/protocol"
)

func code(err error) string {
	var pe *protocol.Error
	if err == nil {
		return "ok"
	}
	if errors.As(err, &pe) {
		return string(pe.Code)
	}
	return err.Error()
}

func TestRulePermits(t *testing.T) {
	r := Rule{Allow: []string{"a.>", "b.*"}, Deny: []string{"a.x.*"}}
	for _, tc := range []struct {
		filter string
		want   bool
	}{
		{"a.b", true}, {"a.x.y", false}, {"a.x", true}, {"b.c", true}, {"b.c.d", false},
		{"c", false}, {"a.>", false}, {"a.b.>", true}, {"b.*", true}, {"a.*.y", false}, {"*", false},
	} {
		if got := r.permits(tc.filter); got != tc.want {
			t.Errorf("permits(%q) = %v, want %v", tc.filter, got, tc.want)
		}
	}
	open := Rule{Deny: []string{"secret.>"}}
	for _, tc := range []struct {
		filter string
		want   bool
	}{{"x", true}, {"secret", true}, {"secret.a", false}, {">", false}, {"*.a", false}, {"*", true}} {
		if got := open.permits(tc.filter); got != tc.want {
			t.Errorf("deny-only permits(%q) = %v, want %v", tc.filter, got, tc.want)
		}
	}
}

func TestIdentityDecisions(t *testing.T) {
	orders := NewUser("orders", RoleNone, 2, Permissions{
		Publish: Rule{Allow: []string{"orders", "orders.>"}, Deny: []string{"orders.secret"}},
		Consume: Rule{Allow: []string{"orders", "orders.>", "$DLQ.orders.>"}},
	})
	pubOnly := NewUser("pub", RoleNone, 3, Permissions{Publish: Rule{Allow: []string{"orders.>"}}, Consume: Rule{Allow: []string{"_INBOX.>"}}})
	all := Unrestricted()
	var nilID *Identity
	top := func(name string, f ...string) Topic { return Topic{Name: name, Subjects: f} }
	cases := []struct {
		name string
		got  error
		want string
	}{
		{"publish own", orders.Publish("orders.eu"), "ok"},
		{"publish denied subject", orders.Publish("orders.secret"), "permission_denied"},
		{"publish other", orders.Publish("billing"), "permission_denied"},
		{"publish $", all.Publish("$DLQ.x.y"), "reserved_subject"},
		{"nil identity publishes", nilID.Publish("x"), "ok"},
		{"create own", orders.CreateTopic(top("orders.eu", "orders.eu.>")), "ok"},
		{"create capture wider than rights", orders.CreateTopic(top("orders.all", ">")), "permission_denied"},
		{"create capture over a deny", orders.CreateTopic(top("orders.x", "orders.*")), "permission_denied"},
		{"create another user's subjects", orders.CreateTopic(top("orders.steal", "billing.>")), "permission_denied"},
		{"create name outside rights", orders.CreateTopic(top("billing", "orders.eu")), "permission_denied"},
		{"create $ name", all.CreateTopic(top("$DLQ.a.b")), "reserved_subject"},
		{"create $ filter", all.CreateTopic(top("grab", "$DLQ.>")), "reserved_subject"},
		{"create publish-only", pubOnly.CreateTopic(top("orders.eu")), "permission_denied"},
		{"consume own topic", orders.ConsumeTopic(top("orders", "orders.>")), "ok"},
		{"consume a topic capturing more", orders.ConsumeTopic(top("orders.x", "orders.x", "billing")), "permission_denied"},
		{"consume own dlq", orders.ConsumeTopic(top("$DLQ.orders.billing")), "ok"},
		{"consume other dlq", orders.ConsumeTopic(top("$DLQ.billing.g")), "permission_denied"},
		{"delete own", orders.ManageTopic(top("orders.eu")), "ok"},
		{"delete dlq without publish rights", orders.ManageTopic(top("$DLQ.orders.g")), "permission_denied"},
		{"delete dlq unrestricted", all.ManageTopic(top("$DLQ.orders.g")), "ok"},
		{"dead letter default", orders.DeadLetter("orders", "g", "$DLQ.orders.g", nil), "ok"},
		{"dead letter none", orders.DeadLetter("orders", "g", "-", nil), "ok"},
		{"dead letter unset", orders.DeadLetter("orders", "g", "", nil), "ok"},
		{"dead letter other $", all.DeadLetter("orders", "g", "$DLQ.billing.g", nil), "reserved_subject"},
		{"dead letter handle", all.DeadLetter("orders", "g", "$F.1.1.0.1.1", nil), "reserved_subject"},
		{"dead letter own existing", orders.DeadLetter("orders", "g", "orders.dead", &Topic{Name: "orders.dead"}), "ok"},
		{"dead letter own new", orders.DeadLetter("orders", "g", "orders.dead", nil), "ok"},
		{"dead letter denied subject", orders.DeadLetter("orders", "g", "orders.secret", nil), "permission_denied"},
		{"dead letter another user's topic", orders.DeadLetter("orders", "g", "billing", &Topic{Name: "billing"}), "permission_denied"},
		{"dead letter existing topic capturing more", orders.DeadLetter("orders", "g", "orders.d", &Topic{Name: "orders.d", Subjects: []string{"billing.>"}}), "permission_denied"},
	}
	for _, tc := range cases {
		if got := code(tc.got); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
	if !pubOnly.SeeTopic(top("orders.eu")) || pubOnly.SeeTopic(top("orders")) || !orders.SeeTopic(top("orders", "orders.>")) {
		t.Error("SeeTopic: a publisher sees what it may publish all of, nothing else")
	}
	if orders.SeeName("billing") || !orders.SeeName("orders") {
		t.Error("SeeName")
	}
	if orders.AllSubjects() || !all.AllSubjects() || !nilID.AllSubjects() || !NewUser("x", RoleNone, 9, Permissions{}).AllSubjects() {
		t.Error("AllSubjects")
	}
}

func TestCan(t *testing.T) {
	perms := Permissions{Publish: Rule{Allow: []string{"a.>"}}, Consume: Rule{Allow: []string{"a.>"}}}
	none := NewUser("n", RoleNone, 2, perms)
	mon := NewUser("m", RoleMonitor, 3, perms)
	adm := NewUser("a", RoleAdmin, 4, perms)
	mine, other := &Topic{Name: "a.x"}, &Topic{Name: "b"}
	for _, tc := range []struct {
		id   *Identity
		a    Action
		t    *Topic
		want bool
	}{
		{none, ViewTopic, mine, true}, {none, ViewTopic, other, false}, {mon, ViewTopic, other, true},
		{none, ReadMessages, mine, true}, {mon, ReadMessages, other, false}, {adm, ReadMessages, other, false},
		{none, ViewMetrics, nil, false}, {mon, ViewMetrics, nil, true}, {adm, ViewMetrics, nil, true},
		{mon, ViewConnections, nil, false}, {adm, ViewConnections, nil, true},
		{mon, Operate, mine, false}, {adm, Operate, other, true}, {none, Operate, mine, false},
		{Unrestricted(), Operate, other, true}, {Unrestricted(), ReadMessages, other, true},
		{none, Action(99), mine, false},
	} {
		if got := tc.id.Can(tc.a, tc.t); got != tc.want {
			t.Errorf("%s role %q: Can(%d, %v) = %v, want %v", tc.id.Name, tc.id.Role, tc.a, tc.t, got, tc.want)
		}
	}
}

// TestFilterAlgebraAgainstEnumeration checks Matches, Covers and Overlap
// against every subject of up to four tokens over a small alphabet.
func TestFilterAlgebraAgainstEnumeration(t *testing.T) {
	toks := []string{"a", "b", "*", ">"}
	var filters []string
	var grow func(prefix []string)
	grow = func(prefix []string) {
		if len(prefix) > 0 {
			filters = append(filters, strings.Join(prefix, "."))
		}
		if len(prefix) == 3 || (len(prefix) > 0 && prefix[len(prefix)-1] == ">") {
			return
		}
		for _, tok := range toks {
			grow(append(append([]string(nil), prefix...), tok))
		}
	}
	grow(nil)
	// Literal subjects up to 4 tokens over a, b, c: one more token and one
	// more letter than any filter uses, so every difference shows.
	var subjects []string
	var lits func(prefix string, n int)
	lits = func(prefix string, n int) {
		for _, tok := range []string{"a", "b", "c"} {
			s := tok
			if prefix != "" {
				s = prefix + "." + tok
			}
			subjects = append(subjects, s)
			if n > 1 {
				lits(s, n-1)
			}
		}
	}
	lits("", 4)
	match := func(f string) map[string]bool {
		m := map[string]bool{}
		for _, s := range subjects {
			if Matches(f, s) {
				m[s] = true
			}
		}
		return m
	}
	for _, a := range filters {
		ma := match(a)
		for _, b := range filters {
			mb := match(b)
			cover, overlap := true, false
			for s := range mb {
				if !ma[s] {
					cover = false
				} else {
					overlap = true
				}
			}
			if got := Covers(a, b); got != cover {
				t.Errorf("Covers(%q, %q) = %v, enumeration says %v", a, b, got, cover)
			}
			if got := Overlap(a, b); got != overlap {
				t.Errorf("Overlap(%q, %q) = %v, enumeration says %v", a, b, got, overlap)
			}
		}
	}
}
