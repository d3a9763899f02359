package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/conformance/fibrilproc"
	"github.com/fibrilmq/fibril/protocol"
)

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// fibrilBinary builds ./cmd/fibril once per test run (or takes $FIBRIL_BIN).
func fibrilBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "fibril-e2e-bin"); buildErr != nil {
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

// readyLine is the part of `fibril serve --ready-json`'s line the tests
// check.
type readyLine struct {
	Addr    string `json:"addr"`
	DataDir string `json:"data_dir"`
	PID     int    `json:"pid"`
}

// startFibril runs `fibril serve` on 127.0.0.1:0 with data in dir (through
// conformance/fibrilproc) and waits for its ready line. The process is
// stopped when the test ends, and its log shown if the test failed.
func startFibril(t *testing.T, dir string, extra ...string) *fibrilproc.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := fibrilproc.Start(ctx, fibrilBinary(t), dir, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop(true)
		if t.Failed() {
			t.Logf("fibril log:\n%s", p.Logs())
		}
	})
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
