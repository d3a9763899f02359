package broker

import (
	"errors"
	"testing"
)

func TestSubjectMatches(t *testing.T) {
	tests := []struct {
		filter, subject string
		want            bool
	}{
		{"a", "a", true},
		{"a", "b", false},
		{"a.b", "a.b", true},
		{"a.b", "a", false},
		{"a", "a.b", false},
		{"a.*", "a.b", true},
		{"a.*", "a.b.c", false},
		{"a.*", "a", false},
		{"a.>", "a.b", true},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{">", "a", true},
		{"*.b.>", "x.b.y.z", true},
		{"*.b.>", "x.c.y", false},
	}
	for _, tt := range tests {
		if got := subjectMatches(tt.filter, tt.subject); got != tt.want {
			t.Errorf("subjectMatches(%q, %q) = %v, want %v", tt.filter, tt.subject, got, tt.want)
		}
	}
}

func TestFiltersOverlap(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"a", "a", true},
		{"a", "b", false},
		{"a.*", "a.b", true},
		{"a.>", "a", false},
		{"a.>", "a.b.c", true},
		{"a.*", "a.b.c", false},
		{"*.b", "a.*", true},
		{"*.b", "a.c", false},
		{">", "x.y", true},
		{"a.*.c", "a.b.>", true},
		{"a.*.c", "a.b.d", false},
	}
	for _, tt := range tests {
		if got := filtersOverlap(tt.a, tt.b); got != tt.want {
			t.Errorf("filtersOverlap(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := filtersOverlap(tt.b, tt.a); got != tt.want {
			t.Errorf("filtersOverlap(%q, %q) = %v, want %v (swapped)", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestValidFilter(t *testing.T) {
	for _, bad := range []string{"", "a..b", ".a", "a.", "a.>.b", "a*", "a b", "a.b>", "pay.\xff", "pay.\xfe", "a\xc0\xaf"} {
		if err := validFilter(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("validFilter(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	for _, good := range []string{"a", "a.b", "a.*", "a.>", ">", "*", "$DLQ.x.y", "caf\u00e9.x"} {
		if err := validFilter(good); err != nil {
			t.Errorf("validFilter(%q) = %v", good, err)
		}
	}
	if err := validTopicName("$x", false); !errors.Is(err, ErrInvalid) {
		t.Errorf("reserved name accepted: %v", err)
	}
	if err := validTopicName("a.*", true); !errors.Is(err, ErrInvalid) {
		t.Errorf("wildcard name accepted: %v", err)
	}
}

// TestBrokerRefusesControlCharSubject: the broker's own subject check
// refused only space, tab, CR and LF, so an embedding program could create
// a topic "a\x01b" or a filter "a.\x7f" that no client can name on the
// wire (SPEC.md 6 allows bytes 0x21-0x7e and UTF-8 only). The rule is now
// wire.CheckSubject, the parser's.
func TestBrokerRefusesControlCharSubject(t *testing.T) {
	for _, bad := range []string{"a\x01b", "a.\x7f", "a\x00", "x.\x1b.y", "a\vb"} {
		if err := validFilter(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("validFilter(%q) = %v, want ErrInvalid", bad, err)
		}
		if err := validTopicName(TopicName(bad), true); !errors.Is(err, ErrInvalid) {
			t.Errorf("validTopicName(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	e := newEnv(t, nil)
	if _, err := e.b.CreateTopic("a\x01b", TopicConfig{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("CreateTopic(a\\x01b) = %v, want ErrInvalid", err)
	}
	if _, err := e.b.CreateTopic("x", TopicConfig{Subjects: []string{"x.\x7f.>"}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("filter with DEL = %v, want ErrInvalid", err)
	}
}

// TestInvalidUTF8NamesRefused: "pay.\xff" and "pay.\xfe" used to be two
// topics that merged into "pay.\ufffd" after a restart (the catalog is
// JSON), leaving a confirmed message unreachable. Names and published
// subjects must be valid UTF-8.
func TestInvalidUTF8NamesRefused(t *testing.T) {
	e := newEnv(t, nil)
	for _, name := range []TopicName{"pay.\xff", "pay.\xfe"} {
		if _, err := e.b.CreateTopic(name, TopicConfig{}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("CreateTopic(%q) = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := e.b.CreateTopic("x", TopicConfig{Subjects: []string{"pay.\xff.>"}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("filter with invalid UTF-8 = %v, want ErrInvalid", err)
	}
	top := e.topic("pay", TopicConfig{Subjects: []string{"pay.>"}})
	err := top.PublishAsync(Message{Subject: "pay.\xff", Data: []byte("x")}, func(Position, error) {})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("publish to pay.\\xff = %v, want ErrInvalid", err)
	}
	ok := e.topic("caf\u00e9", TopicConfig{})
	e.publish(ok, "x")
	e.restart()
	if _, found := e.b.Topic("caf\u00e9"); !found {
		t.Fatal("valid UTF-8 topic name did not round-trip")
	}
}
