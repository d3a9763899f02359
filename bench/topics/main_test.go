package main

import (
	"strings"
	"testing"
)

// TestFiveHundredTopicsUnderTheBound is the short form of the benchmark:
// 500 one-message topics created through a real `fibril serve` with
// --max-open-partitions 25 leave the server with at most the files 25
// partitions' logs hold (four each) plus its own (listeners, connections,
// catalog, a few transient), not the 2,000 that 500 open partitions hold.
func TestFiveHundredTopicsUnderTheBound(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server")
	}
	const bound = 25*4 + 64
	var out strings.Builder
	res, err := run(config{n: 500, conns: 4, pkg: "../../cmd/fibril", out: &out,
		serveArgs: []string{"--max-open-partitions", "25"},
		settled:   func(u usage) bool { return u.fds <= bound }})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if res.settled.fds > bound {
		t.Fatalf("%d files open after 500 topics with --max-open-partitions 25, want at most %d\n%s", res.settled.fds, bound, out.String())
	}
	t.Log(out.String())
}
