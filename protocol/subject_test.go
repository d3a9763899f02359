package protocol

import "testing"

func TestMatchSubject(t *testing.T) {
	tests := []struct {
		filter, subject string
		want            bool
	}{
		{"a", "a", true}, {"a", "b", false}, {"a.b", "a", false}, {"a", "a.b", false},
		{"a.*", "a.b", true}, {"a.*", "a.b.c", false}, {"a.*", "a", false},
		{"a.>", "a.b", true}, {"a.>", "a.b.c", true}, {"a.>", "a", false},
		{">", "a", true}, {">", "a.b", true}, {"*", "a", true}, {"*", "a.b", false},
		{"*.b.>", "x.b.c", true}, {"*.b.>", "x.c.c", false}, {"a.*.c", "a.b.c", true},
		{"orders", "orders", true}, {"ab", "a", false},
	}
	for _, tc := range tests {
		if got := MatchSubject([]byte(tc.filter), []byte(tc.subject)); got != tc.want {
			t.Errorf("MatchSubject(%q, %q) = %v", tc.filter, tc.subject, got)
		}
	}
}

func TestFiltersOverlap(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"a", "a", true}, {"a", "b", false}, {"a", "a.>", false}, {"a.>", "a.b", true},
		{"a.*", "a.b", true}, {"a.*", "a.b.c", false}, {"a.*", "*.b", true}, {">", "x.y", true},
		{"a.*.c", "a.b.*", true}, {"a.*.c", "a.b.d", false}, {"*", "a.b", false}, {"a.b", "a.b.c", false},
	}
	for _, tc := range tests {
		if got := FiltersOverlap([]byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("FiltersOverlap(%q, %q) = %v", tc.a, tc.b, got)
		}
		if got := FiltersOverlap([]byte(tc.b), []byte(tc.a)); got != tc.want {
			t.Errorf("FiltersOverlap(%q, %q) = %v (not symmetric)", tc.b, tc.a, got)
		}
	}
}

func TestReservedNames(t *testing.T) {
	if DeadLetterTopic("orders", "billing") != "$DLQ.orders.billing" {
		t.Fatal("DeadLetterTopic")
	}
	for s, want := range map[string]bool{"orders": true, "_INBOX.x": false, "$DLQ.a.b": false, "$F.1.1.0.1.1": false, "_INBOXES": true} {
		if AutoCreatable([]byte(s)) != want {
			t.Errorf("AutoCreatable(%q) != %v", s, want)
		}
	}
}
