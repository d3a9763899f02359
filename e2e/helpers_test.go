package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// fibrilBinary builds ./cmd/fibril once per test run.
func fibrilBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fibril-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "fibril")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/fibrilmq/fibril/cmd/fibril").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is a running fibril serve.
type proc struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{} // closed when the process has exited
	err  error         // its exit error, once done is closed
}

type readyLine struct {
	Addr    string `json:"addr"`
	DataDir string `json:"data_dir"`
	PID     int    `json:"pid"`
}

// startFibril runs `fibril serve` on 127.0.0.1:0 with data in dir and waits
// for its ready line. The process is killed when the test ends.
func startFibril(t *testing.T, dir string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data", dir, "--ready-json", "--log-level", "warn"}, extra...)
	cmd := exec.Command(fibrilBinary(t), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = testLog{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
		p.err = cmd.Wait()
		close(p.done)
	}()
	select {
	case l := <-lines:
		var r readyLine
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Addr == "" || r.PID != cmd.Process.Pid {
			t.Fatalf("bad ready line %q: %v", l, err)
		}
		p.addr = r.Addr
	case <-p.done:
		t.Fatalf("fibril exited before ready: %v", p.err)
	case <-time.After(20 * time.Second):
		t.Fatal("no ready line in 20s")
	}
	return p
}

type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) { l.t.Logf("fibril: %s", b); return len(b), nil }

// client is a minimal protocol client over the protocol package.
type client struct {
	t    *testing.T
	nc   net.Conn
	p    *protocol.Parser
	buf  []byte
	cmds []protocol.Command // parsed, copied frames not yet taken
}

func dialClient(t *testing.T, addr string, connect string) (*client, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c := &client{t: t, nc: nc, p: protocol.NewParser(protocol.ServerToClient, protocol.Limits{})}
	if f, err := c.next(); err != nil || f.Op != protocol.OpInfo {
		nc.Close()
		return nil, fmt.Errorf("no INFO: %v %v", f.Op, err)
	}
	if _, err := nc.Write([]byte("CONNECT " + connect + "\r\n")); err != nil {
		return nil, err
	}
	if f, err := c.next(); err != nil || f.Op != protocol.OpOK {
		nc.Close()
		return nil, fmt.Errorf("CONNECT answer %v %q %v", f.Op, f.Text, err)
	}
	return c, nil
}

func (c *client) close() { c.nc.Close() }

// next returns the next frame (copied), reading as needed (10s deadline).
func (c *client) next() (protocol.Command, error) {
	for len(c.cmds) == 0 {
		n, err := c.p.Parse(c.buf, protocol.HandlerFunc(func(cmd *protocol.Command) error {
			cp := *cmd
			cp.Subject = append([]byte(nil), cmd.Subject...)
			cp.Reply = append([]byte(nil), cmd.Reply...)
			cp.Sid = append([]byte(nil), cmd.Sid...)
			cp.Header = append([]byte(nil), cmd.Header...)
			cp.Payload = append([]byte(nil), cmd.Payload...)
			cp.Text = append([]byte(nil), cmd.Text...)
			cp.JSON = append([]byte(nil), cmd.JSON...)
			c.cmds = append(c.cmds, cp)
			return nil
		}))
		c.buf = c.buf[n:]
		if err != nil {
			return protocol.Command{}, err
		}
		if len(c.cmds) > 0 {
			break
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		tmp := make([]byte, 64<<10)
		m, err := c.nc.Read(tmp)
		c.buf = append(c.buf, tmp[:m]...)
		if err != nil && m == 0 {
			return protocol.Command{}, err
		}
	}
	f := c.cmds[0]
	c.cmds = c.cmds[1:]
	return f, nil
}
