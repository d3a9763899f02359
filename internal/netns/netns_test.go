package netns

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// newNet makes a Net with a fresh prefix, or skips saying why it cannot.
func newNet(t *testing.T) *Net {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	n, err := New("ft" + hex.EncodeToString(b))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
		out, _ := exec.Command("ip", "netns", "list").CombinedOutput()
		if strings.Contains(string(out), n.prefix) {
			t.Errorf("namespaces left after Close:\n%s", out)
		}
	})
	return n
}

func add(t *testing.T, n *Net, name string) *Node {
	t.Helper()
	nd, err := n.Add(name)
	if err != nil {
		t.Fatal(err)
	}
	return nd
}

// echoServer listens on nd's address inside its namespace and echoes one
// line per connection until the test ends.
func echoServer(t *testing.T, nd *Node) string {
	t.Helper()
	var ln net.Listener
	if err := nd.Do(func() (err error) { ln, err = net.Listen("tcp", nd.IP+":0"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.CopyN(c, c, 5) }()
		}
	}()
	return ln.Addr().String()
}

// reach reports whether from can open a connection to addr and get an echo
// within 500 ms.
// reachSoon is reach for what must work: tried for up to about 3 s, since
// a bridge port forwards a moment after it comes up and a loaded machine
// (go test ./... under -race) can miss one 500 ms dial
// (TestPartitionOneFromTwo failed once so).
func reachSoon(from *Node, addr string) bool {
	for range 6 {
		if reach(from, addr) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

func reach(from *Node, addr string) bool {
	err := from.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := c.Write([]byte("hello")); err != nil {
			return err
		}
		_, err = io.ReadFull(c, make([]byte, 5))
		return err
	})
	return err == nil
}

func TestIsolateAndRejoin(t *testing.T) {
	n := newNet(t)
	a, b := add(t, n, "a"), add(t, n, "b")
	addr := echoServer(t, a)
	if !reachSoon(b, addr) {
		t.Fatal("b cannot reach a on the bridge")
	}
	if err := a.Isolate(); err != nil {
		t.Fatal(err)
	}
	if reach(b, addr) {
		t.Fatal("b reaches a while a is isolated")
	}
	if err := a.Rejoin(); err != nil {
		t.Fatal(err)
	}
	ok := false
	for range 20 { // the bridge port takes a moment to forward again
		if ok = reach(b, addr); ok {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !ok {
		t.Fatal("b cannot reach a after it rejoined")
	}
}

func TestPartitionOneFromTwo(t *testing.T) {
	n := newNet(t)
	a, b, c := add(t, n, "a"), add(t, n, "b"), add(t, n, "c")
	addrA, addrB := echoServer(t, a), echoServer(t, b)
	if err := n.Partition([]*Node{a}, []*Node{b, c}); err != nil {
		t.Fatal(err)
	}
	if reach(b, addrA) || reach(c, addrA) || reach(a, addrB) {
		t.Fatal("traffic crosses the partition")
	}
	if !reachSoon(c, addrB) {
		t.Fatal("b and c, on the same side, cannot talk")
	}
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	if !reachSoon(b, addrA) || !reachSoon(a, addrB) {
		t.Fatal("the partition outlived Heal")
	}
}

// TestNetemDelay checks delay with netem where the kernel has it (this
// CI kernel may not: the test then says so).
func TestNetemDelay(t *testing.T) {
	n := newNet(t)
	a, b := add(t, n, "a"), add(t, n, "b")
	addr := echoServer(t, a)
	err := b.Netem("delay 100ms")
	if errors.Is(err, ErrNoNetem) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if !reachSoon(b, addr) {
		t.Fatal("no echo under delay")
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("round trip %v under a 100 ms delay", d)
	}
	if err := b.Netem(""); err != nil {
		t.Fatal(err)
	}
}

func TestCommandRunsInsideTheNamespace(t *testing.T) {
	n := newNet(t)
	a := add(t, n, "a")
	out, err := a.Command(t.Context(), "ip", "-o", "-4", "addr", "show", "dev", "eth0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), a.IP+"/24") {
		t.Fatalf("ip addr inside %s: %v\n%s", a.NS, err, out)
	}
}

func TestNewRefusesBadPrefixes(t *testing.T) {
	for _, p := range []string{"", "toolongprefix", "a-b", "a b"} {
		if _, err := New(p); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
}
