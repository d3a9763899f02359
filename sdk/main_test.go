package fibril_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/conformance/fibrilproc"
	fibril "github.com/fibrilmq/fibril/sdk"
)

// The tests and examples share one real `fibril serve` on 127.0.0.1 port 0,
// built once (or $FIBRIL_BIN). Tests that restart a server start their own.
var (
	serverBin  string
	serverURL  string
	serverTemp string
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "fibril-sdk-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		serverTemp = dir
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if serverBin, err = fibrilproc.Build(ctx, dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		srv, err := fibrilproc.Start(ctx, serverBin, filepath.Join(dir, "shared"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer srv.Stop(false)
		serverURL = "fibril://" + srv.Addr
		return m.Run()
	}())
}

// startServer starts a server of the test's own (stopped in cleanup), with
// extra `fibril serve` flags.
func startServer(t *testing.T, args ...string) *fibrilproc.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := fibrilproc.Start(ctx, serverBin, t.TempDir(), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(false) })
	return srv
}

// connect opens a Conn to url (the shared server when empty), closed in
// cleanup.
func connect(t *testing.T, url string, opts ...fibril.Option) *fibril.Conn {
	t.Helper()
	if url == "" {
		url = serverURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := fibril.Connect(ctx, url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// topicName returns a topic name unique to the test.
func topicName(t *testing.T) string {
	b := []byte(t.Name())
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return fmt.Sprintf("sdk.%s.%d", b, time.Now().UnixNano())
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
