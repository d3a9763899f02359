package e2e

import (
	"bufio"
	"encoding/json"
	"net"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestServeNoFlags runs `fibril serve --ready-json` with nothing else in a
// fresh directory: it listens on 127.0.0.1:4222 with data in ./fibril-data,
// and exits 0 on SIGTERM.
func TestServeNoFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	if l, err := net.Listen("tcp", "127.0.0.1:4222"); err != nil {
		t.Skipf("port 4222 is busy here: %v", err)
	} else {
		l.Close()
	}
	dir := t.TempDir()
	cmd := exec.Command(fibrilBinary(t), "serve", "--ready-json")
	cmd.Dir = dir
	cmd.Stderr = testLog{t}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	var r readyLine
	select {
	case l := <-line:
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("ready line %q: %v", l, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no ready line")
	}
	if r.Addr != "127.0.0.1:4222" || r.DataDir != filepath.Join(dir, "fibril-data") || r.PID != cmd.Process.Pid {
		t.Fatalf("ready %+v, want 127.0.0.1:4222, %s and pid %d", r, filepath.Join(dir, "fibril-data"), cmd.Process.Pid)
	}
	c, err := dialClient(t, r.Addr, `{"fibril":1}`)
	if err != nil {
		t.Fatal(err)
	}
	c.close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("did not exit after SIGTERM")
	}
}
