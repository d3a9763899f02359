// Package fibrilproc starts the real `fibril serve` binary for tests and
// harnesses in Go: it builds ./cmd/fibril once (or takes FIBRIL_BIN), starts
// it on 127.0.0.1 port 0 with a data directory, reads its --ready-json line,
// restarts it on the same address, and stops it by PID.
//
// It must never leave a server running after Stop, never write into the
// working directory, and never kill any process it did not start.
package fibrilproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Package is the import path of the server command.
const Package = "github.com/fibrilmq/fibril/cmd/fibril"

// Build returns the fibril binary to run: $FIBRIL_BIN if set, else a fresh
// build of Package into dir.
func Build(ctx context.Context, dir string) (string, error) {
	if b := os.Getenv("FIBRIL_BIN"); b != "" {
		return b, nil
	}
	out := filepath.Join(dir, "fibril")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, Package)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("fibrilproc: go build %s: %w\n%s", Package, err, msg)
	}
	return out, nil
}

// Server is one running fibril process.
type Server struct {
	Bin     string
	DataDir string
	Args    []string // extra flags for `fibril serve`
	Env     []string // extra environment variables (KEY=value) for the process
	// Listen is the first --listen address (default 127.0.0.1:0); Restart
	// reuses the port it got.
	Listen string
	// Prefix runs the binary through a command, e.g. ["ip", "netns",
	// "exec", "ns1"]; it must exec the binary (same PID) for signals to
	// reach the server.
	Prefix  []string
	Addr    string // host:port once started
	TLSAddr string // host:port of the TLS listener, if --tls-listen was given
	HTTP    string // the admin listener's URL (http://host:port), if --http was given
	// RestartTook is how long the last Restart waited for the ready line.
	RestartTook time.Duration

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logs *lockedWriter // the current process's stderr
}

// Ready is the --ready-json line.
type Ready struct {
	Addr     string `json:"addr"`
	ServerID string `json:"server_id"`
	DataDir  string `json:"data_dir"`
	PID      int    `json:"pid"`
	TLSAddr  string `json:"tls_addr"`
	HTTP     string `json:"http"`
}

// Start runs `bin serve --listen 127.0.0.1:0 --data dataDir --ready-json
// args...` and waits for the ready line.
func Start(ctx context.Context, bin, dataDir string, args ...string) (*Server, error) {
	s := &Server{Bin: bin, DataDir: dataDir, Args: args}
	if err := s.start(ctx, "127.0.0.1:0"); err != nil {
		return nil, err
	}
	return s, nil
}

// StartEnv is Start with extra environment variables (KEY=value), kept for
// every Restart.
func StartEnv(ctx context.Context, bin, dataDir string, env []string, args ...string) (*Server, error) {
	s := &Server{Bin: bin, DataDir: dataDir, Args: args, Env: env}
	if err := s.start(ctx, "127.0.0.1:0"); err != nil {
		return nil, err
	}
	return s, nil
}

// StartServer starts s as configured (Bin, DataDir, Args, Env, Listen,
// Prefix) and waits for its ready line.
func StartServer(ctx context.Context, s *Server) error {
	listen := s.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	return s.start(ctx, listen)
}

func (s *Server) start(ctx context.Context, listen string) error {
	args := append([]string{"serve", "--listen", listen, "--data", s.DataDir, "--ready-json", "--log-level", "warn"}, s.Args...)
	argv := append(append(append([]string{}, s.Prefix...), s.Bin), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	if len(s.Env) > 0 {
		cmd.Env = append(os.Environ(), s.Env...)
	}
	dieWithParent(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	logs := &lockedWriter{b: &strings.Builder{}}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("fibrilproc: starting %s: %w", s.Bin, err)
	}
	done := make(chan struct{})
	ready := make(chan Ready, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var r Ready
			if json.Unmarshal(sc.Bytes(), &r) == nil && r.Addr != "" {
				select {
				case ready <- r:
				default:
				}
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case r := <-ready:
		s.mu.Lock()
		s.cmd, s.done, s.logs, s.Addr, s.TLSAddr, s.HTTP = cmd, done, logs, r.Addr, r.TLSAddr, r.HTTP
		s.mu.Unlock()
		return nil
	case <-done:
		return fmt.Errorf("fibrilproc: server exited before it was ready: %s", logs.String())
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("fibrilproc: waiting for the ready line: %w (logs: %s)", ctx.Err(), logs.String())
	}
}

type lockedWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

// String returns what was written, under the writer's lock (the process's
// output goroutine writes while tests read).
func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// Write implements io.Writer, keeping the first MiB.
func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() < 1<<20 {
		w.b.Write(p)
	}
	return len(p), nil
}

// Logs returns what the current process wrote on stderr (first MiB).
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs == nil {
		return ""
	}
	return s.logs.String()
}

// Signal sends sig to the running process (SIGSTOP and SIGCONT for a
// pause). It fails when no process is running.
func (s *Server) Signal(sig os.Signal) error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return errors.New("fibrilproc: no process running")
	}
	return cmd.Process.Signal(sig)
}

// Stop ends the process: SIGTERM, then SIGKILL after 5 s. With kill it sends
// SIGKILL at once (a crash). It waits for the process to exit.
func (s *Server) Stop(kill bool) error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	return nil
}

// Restart stops the server (crash with kill) and starts it again on the same
// address and data directory, retrying while the port is still taken.
func (s *Server) Restart(ctx context.Context, kill bool) error {
	addr := s.Addr
	if err := s.Stop(kill); err != nil {
		return err
	}
	var err error
	start := time.Now()
	for {
		if err = s.start(ctx, addr); err == nil {
			s.RestartTook = time.Since(start)
			return nil
		}
		if ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// PID returns the process id of the running server, or 0 when none runs.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}
