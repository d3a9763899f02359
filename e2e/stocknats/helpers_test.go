package stocknats

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/conformance/fibrilproc"
	"github.com/nats-io/nats.go"
)

// target is one server the cases run against.
type target struct {
	name string
	url  string
	// raw runs Fibril management lines (TOPIC ...) on a Fibril-mode
	// connection; nil for nats-server.
	raw func(t *testing.T, lines ...string) []string
}

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// fibrilBinary builds ./cmd/fibril once (or takes $FIBRIL_BIN).
func fibrilBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "fibril-stocknats-bin"); buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		binPath, buildErr = fibrilproc.Build(ctx, binDir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// startFibril runs `fibril serve` with extra flags; data in a temp dir.
func startFibril(t *testing.T, extra ...string) (*fibrilproc.Server, target) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := fibrilproc.Start(ctx, fibrilBinary(t), t.TempDir(), extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop(false)
		if t.Failed() {
			t.Logf("fibril log:\n%s", p.Logs())
		}
	})
	addr := p.Addr
	return p, target{name: "fibril", url: "nats://" + addr, raw: func(t *testing.T, lines ...string) []string {
		return fibrilLines(t, addr, lines...)
	}}
}

// natsServerBin finds nats-server: $NATS_SERVER_BIN, $PATH, $HOME/go/bin.
// Missing, the control runs are skipped outside CI and fail in CI.
func natsServerBin(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("NATS_SERVER_BIN"); b != "" {
		return b
	}
	if b, err := exec.LookPath("nats-server"); err == nil {
		return b
	}
	if home, err := os.UserHomeDir(); err == nil {
		if b := filepath.Join(home, "go", "bin", "nats-server"); fileExists(b) {
			return b
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("nats-server not found (.ci/run installs it with go install)")
	}
	t.Skip("nats-server not installed: go install github.com/nats-io/nats-server/v2@v2.15.3")
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// startNATSServer runs nats-server (no JetStream unless extra says) on a
// free loopback port.
func startNATSServer(t *testing.T, extra ...string) target {
	t.Helper()
	bin := natsServerBin(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	cmd := exec.Command(bin, append([]string{"-a", "127.0.0.1", "-p", fmt.Sprint(port)}, extra...)...)
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server did not listen: %v\n%s", err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return target{name: "nats-server", url: "nats://" + addr}
}

// both runs fn against fibril serve and nats-server as subtests.
func both(t *testing.T, fn func(t *testing.T, tg target)) {
	t.Run("fibril", func(t *testing.T) {
		_, tg := startFibril(t)
		fn(t, tg)
	})
	t.Run("nats-server", func(t *testing.T) { fn(t, startNATSServer(t)) })
}

// connect opens a nats.go connection that never reconnects.
func connect(t *testing.T, tg target, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{nats.Timeout(5 * time.Second), nats.NoReconnect()}, opts...)
	nc, err := nats.Connect(tg.url, opts...)
	if err != nil {
		t.Fatalf("%s: connect: %v", tg.name, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// fibrilLines sends lines on a Fibril-mode connection and returns one
// answer line per line sent.
func fibrilLines(t *testing.T, addr string, lines ...string) []string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	if _, err := r.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(c, "CONNECT {\"fibril\":1}\r\n%s\r\n", strings.Join(lines, "\r\n")); err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(lines))
	for range len(lines) + 1 {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("answer: %v", err)
		}
		out = append(out, strings.TrimRight(l, "\r\n"))
	}
	return out[1:] // the CONNECT's +OK
}

// rawConn is a NATS-mode connection speaking the wire directly.
type rawConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, tg target, connect string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(tg.url, "nats://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	rc := &rawConn{t: t, c: c, r: bufio.NewReader(c)}
	rc.line() // INFO
	rc.send("CONNECT " + connect + "\r\nPING\r\n")
	rc.expect("PONG")
	return rc
}

func (rc *rawConn) send(s string) {
	rc.t.Helper()
	_ = rc.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.c.Write([]byte(s)); err != nil {
		rc.t.Fatal(err)
	}
}

func (rc *rawConn) line() string {
	rc.t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	l, err := rc.r.ReadString('\n')
	if err != nil {
		rc.t.Fatalf("read: %v (got %q)", err, l)
	}
	return strings.TrimRight(l, "\r\n")
}

// expect reads lines until one equals want, skipping server PINGs and
// INFO updates.
func (rc *rawConn) expect(want string) {
	rc.t.Helper()
	for {
		l := rc.line()
		if l == want {
			return
		}
		if l == "PING" || strings.HasPrefix(l, "INFO ") {
			continue
		}
		rc.t.Fatalf("got %q, want %q", l, want)
	}
}

// waitFor polls cond for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dirSize is the bytes of the files under dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
