package cluster

import (
	"reflect"
	"testing"
)

func TestParsePeers(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []PeerConfig
		bad  bool
	}{
		{in: "", want: nil},
		{in: "  ", want: nil},
		{in: "n2@127.0.0.1:7422", want: []PeerConfig{{"n2", "127.0.0.1:7422"}}},
		{in: "n2@10.0.0.2:7422, n3@[::1]:7422 ,node-4@host.example:1",
			want: []PeerConfig{{"n2", "10.0.0.2:7422"}, {"n3", "[::1]:7422"}, {"node-4", "host.example:1"}}},
		{in: "n2", bad: true},
		{in: "@127.0.0.1:1", bad: true},
		{in: "n2@127.0.0.1", bad: true},
		{in: "n2@127.0.0.1:", bad: true},
		{in: "-n2@127.0.0.1:1", bad: true},
		{in: "n_2@127.0.0.1:1", bad: true},
		{in: "n2@a:1,n2@b:1", bad: true},
		{in: "n2@a:1,,n3@b:1", bad: true},
		{in: "a123456789012345678901234567890123456789012345678901234567890123@a:1", bad: true},
	} {
		got, err := ParsePeers(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("ParsePeers(%q) = %v, want an error", c.in, got)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParsePeers(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}
