package testserver

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/memstore"
	"github.com/fibrilmq/fibril/server"
)

// roundTrip dials addr, reads INFO, sends lines in fibril mode and returns
// INFO and the answer lines (one per command).
func roundTrip(t *testing.T, addr string, cmds ...string) (string, []string) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(nc)
	info, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("INFO: %v", err)
	}
	fmt.Fprintf(nc, "CONNECT {\"fibril\":1}\r\n%s\r\n", strings.Join(cmds, "\r\n"))
	var out []string
	for range len(cmds) + 1 {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("answer: %v (so far %q)", err, out)
		}
		out = append(out, strings.TrimSpace(l))
	}
	return info, out[1:]
}

func TestStart(t *testing.T) {
	ms := memstore.New()
	var seen server.Options
	s := Start(t, WithStore(ms.Open), WithOptions(func(o *server.Options) { o.ServerName = "ts-test"; seen = *o }))
	if !strings.HasPrefix(s.Addr().String(), "127.0.0.1:") || seen.EventLoops != 1 || seen.DataDir == "" {
		t.Fatalf("addr %s, options %+v", s.Addr(), seen)
	}
	info, ans := roundTrip(t, s.Addr().String(), "TOPIC CREATE ts", "PUB ts 2\r\nhi")
	if !strings.Contains(info, `"server_name":"ts-test"`) {
		t.Errorf("INFO %s lacks the server name set by WithOptions", info)
	}
	if len(ans) != 2 || !strings.HasPrefix(ans[0], "+OK {") || ans[1] != "+OK 0:1" {
		t.Fatalf("answers %q", ans)
	}
	// The engine's logs are ms's: failing them fails the next publish.
	ms.FailAppends(func(string) bool { return true })
	if _, ans := roundTrip(t, s.Addr().String(), "PUB ts 2\r\nhi"); len(ans) != 1 || !strings.HasPrefix(ans[0], "-ERR") {
		t.Fatalf("publish with the store failing: %q, want -ERR", ans)
	}
	ms.FailAppends(nil)
}

func TestStartWithoutBroker(t *testing.T) {
	addr := Addr(t, WithoutBroker())
	_, ans := roundTrip(t, addr, "TOPIC LIST")
	if len(ans) != 1 || !strings.HasPrefix(ans[0], "-ERR") {
		t.Fatalf("TOPIC LIST without the engine: %q, want -ERR", ans)
	}
}
