package fibril

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParseServer(t *testing.T) {
	tests := []struct {
		in, addr string
		tls, ok  bool
	}{
		{"fibril://127.0.0.1:4333", "127.0.0.1:4333", false, true},
		{"nats://h:1", "h:1", false, true},
		{"tls://h", "h:4222", true, true},
		{"fibrils://h:9", "h:9", true, true},
		{"127.0.0.1:5", "127.0.0.1:5", false, true},
		{"", "127.0.0.1:4222", false, true},
		{"http://h:1", "", false, false},
		{"fibril://[::1]:7", "[::1]:7", false, true},
		{"fibril://h:1/path", "", false, false},
		{"fibril://h:1?x=1", "", false, false},
		{"fibril://h:x", "", false, false},
	}
	for _, tt := range tests {
		s, err := parseServer(tt.in)
		if (err == nil) != tt.ok || s.addr != tt.addr || s.tls != tt.tls {
			t.Errorf("parseServer(%q) = %q %v %v", tt.in, s.addr, s.tls, err)
		}
		if err != nil && !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("parseServer(%q): %v is not ErrInvalidArgument", tt.in, err)
		}
	}
}

func TestParseServers(t *testing.T) {
	tests := []struct {
		raw   string
		more  []string
		addrs []string // nil: an error
	}{
		{"", nil, []string{"127.0.0.1:4222"}},
		{"nats://a:1,nats://b:2", nil, []string{"a:1", "b:2"}},
		{" nats://a:1 , tls://b:2 ", nil, []string{"a:1", "b:2"}},
		{"a:1", []string{"b:2", "c:3"}, []string{"a:1", "b:2", "c:3"}},
		{"", []string{"b:2"}, []string{"b:2"}},
		{"a:1,a:1", []string{"fibril://a:1"}, []string{"a:1"}},
		{"a:1,,b:2", nil, nil},
		{"a:1,", nil, nil},
		{"a:1", []string{""}, nil},
		{"a:1,http://b:2", nil, nil},
	}
	for _, tt := range tests {
		l, err := parseServers(tt.raw, tt.more)
		if tt.addrs == nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("parseServers(%q, %q) = %v, %v; want ErrInvalidArgument", tt.raw, tt.more, l.addrs(), err)
			}
			continue
		}
		if err != nil || !slices.Equal(l.addrs(), tt.addrs) {
			t.Errorf("parseServers(%q, %q) = %v, %v; want %v", tt.raw, tt.more, l.addrs(), err, tt.addrs)
		}
	}
	var many []string
	for i := range maxServers + 1 {
		many = append(many, fmt.Sprintf("h:%d", i+1))
	}
	if l, err := parseServers(strings.Join(many[:maxServers], ","), nil); err != nil || len(l.s) != maxServers {
		t.Errorf("%d servers: %d, %v", maxServers, len(l.s), err)
	}
	if _, err := parseServers(strings.Join(many, ","), nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("%d servers: %v, want ErrInvalidArgument", maxServers+1, err)
	}
}

// TestServerListDiscover: connect_urls join the list once each, with the
// scheme and credentials of the server that sent them, up to maxServers;
// entries that are not host:port are skipped and reported.
func TestServerListDiscover(t *testing.T) {
	l, err := parseServers("tls://u:p@a:1,b:2", nil)
	if err != nil {
		t.Fatal(err)
	}
	added, bad := l.discover(0, []string{"a:1", "c:3", "c:3", "nats://d:4", "e:5", "x"})
	if !slices.Equal(added, []string{"c:3", "e:5"}) || !slices.Equal(bad, []string{"nats://d:4", "x"}) {
		t.Fatalf("added %v bad %v", added, bad)
	}
	if !slices.Equal(l.addrs(), []string{"a:1", "b:2", "c:3", "e:5"}) {
		t.Fatalf("list %v", l.addrs())
	}
	c := l.s[2]
	if !c.tls || c.user != "u" || c.pass != "p" || c.host != "c" || !c.discovered {
		t.Fatalf("discovered entry %+v does not take a:1's scheme and credentials", c)
	}
	if d := l.s[1]; d.tls || d.hasUser || d.discovered {
		t.Fatalf("given entry changed: %+v", d)
	}
	var many []string
	for i := range 2 * maxServers {
		many = append(many, fmt.Sprintf("m:%d", i+1))
	}
	added, _ = l.discover(1, many)
	if len(l.s) != maxServers || len(added) != maxServers-4 {
		t.Fatalf("list of %d after %d added, want it capped at %d", len(l.s), len(added), maxServers)
	}
	if s := l.s[5]; s.tls || s.hasUser {
		t.Fatalf("entry learnt from b:2 took another server's scheme: %+v", s)
	}
}

// TestBackoffGrowsPerPass: the reconnect delay's attempt number is the count
// of full passes over the list, so every server of a pass is tried after the
// same delay.
func TestBackoffGrowsPerPass(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		var p passCounter
		var got []int
		for range 7 {
			got = append(got, p.pass)
			p.tried(n)
		}
		want := make([]int, 7)
		for i := range want {
			want[i] = i / n
		}
		if !slices.Equal(got, want) {
			t.Errorf("%d servers: passes %v, want %v", n, got, want)
		}
	}
}
