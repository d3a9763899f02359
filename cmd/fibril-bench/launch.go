package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fibrilmq/fibril/server"
)

// ServerDesc says which server a run used.
type ServerDesc struct {
	Addr    string `json:"addr"`
	PID     int    `json:"pid,omitempty"`
	Version string `json:"version"`
	Started bool   `json:"started"` // started by this run (fresh data dir)
	RSSNote string `json:"rss_note"`
}

// serverProc is the server of one run: started here (child process or
// embedded) or given with --url.
type serverProc struct {
	addr    string
	httpURL string // a started Fibril's admin listener (its /metrics)
	pid     int
	version string
	started bool
	embed   bool
	cmd     *exec.Cmd
	exited  chan struct{}
	dir     string
	keep    bool
	logPath string
	cancel  context.CancelFunc // embedded server
	runDone chan error
	prof    *os.File
	trace   *os.File
	memProf string
	stopOne sync.Once
}

// startServer starts the server cfg asks for, or describes the one at --url.
func startServer(ctx context.Context, cfg *Config) (*serverProc, error) {
	if len(cfg.clusterAddrs) > 0 {
		return &serverProc{addr: cfg.clusterAddrs[0], pid: cfg.ServerPID}, nil
	}
	if cfg.URL != "" {
		u, err := url.Parse(cfg.URL)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("%w: --url %q: want nats://host:port", errUsage, cfg.URL)
		}
		return &serverProc{addr: u.Host, pid: cfg.ServerPID}, nil
	}
	dir, err := os.MkdirTemp("", "fibril-bench-*")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	s := &serverProc{dir: dir, keep: cfg.KeepData, started: true, logPath: filepath.Join(dir, "server.log")}
	switch {
	case cfg.Embed:
		err = s.startEmbedded(cfg)
	case cfg.System == "fibril":
		err = s.startFibril(ctx, cfg)
	default:
		err = s.startNATS(ctx, cfg)
	}
	if err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// startFibril runs `fibril serve` on a temp dir, port 0, and reads its
// --ready-json line.
func (s *serverProc) startFibril(ctx context.Context, cfg *Config) error {
	args := []string{"serve", "--listen", "127.0.0.1:0", "--data", filepath.Join(s.dir, "data"),
		"--ready-json", "--log-level", "warn", "--http", "127.0.0.1:0"}
	if cfg.Mode != "plain" {
		// The durable modes publish to topics they do not create first;
		// plain pub/sub must not be captured (auto-create is off by default).
		args = append(args, "--auto-create=>")
	}
	args = append(args, cfg.ServerArgs...)
	if err := s.spawn(cfg.FibrilBin, args...); err != nil {
		return err
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := s.run(); err != nil {
		return err
	}
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- l
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l := <-line:
		var ready struct {
			Addr string `json:"addr"`
			PID  int    `json:"pid"`
			HTTP string `json:"http"`
		}
		if err := json.Unmarshal([]byte(l), &ready); err != nil || ready.Addr == "" {
			return fmt.Errorf("fibril serve: no ready line (got %q): %s", l, s.logTail())
		}
		s.addr, s.httpURL = ready.Addr, ready.HTTP
	case <-s.exited:
		return fmt.Errorf("fibril serve exited at start: %s", s.logTail())
	case <-time.After(30 * time.Second):
		return fmt.Errorf("fibril serve: no ready line within 30 s: %s", s.logTail())
	case <-ctx.Done():
		return ctx.Err()
	}
	if v, err := exec.Command(cfg.FibrilBin, "version").Output(); err == nil {
		s.version = strings.TrimSpace(string(v))
	}
	return nil
}

// startNATS runs nats-server with JetStream (file storage) on a free
// loopback port.
func (s *serverProc) startNATS(ctx context.Context, cfg *Config) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	conf := fmt.Sprintf("listen: 127.0.0.1:%d\njetstream {\n  store_dir: %q\n", port, filepath.Join(s.dir, "js"))
	if cfg.NatsSyncAlways {
		conf += "  sync_interval: always\n"
	}
	conf += "}\n"
	path := filepath.Join(s.dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return err
	}
	if err := s.spawn(cfg.NatsBin, "-c", path); err != nil {
		return err
	}
	if err := s.run(); err != nil {
		return err
	}
	s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-s.exited:
			return fmt.Errorf("nats-server exited at start: %s", s.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nats-server not listening on %s within 30 s: %s", s.addr, s.logTail())
		}
	}
	if v, err := exec.Command(cfg.NatsBin, "--version").Output(); err == nil {
		s.version = strings.TrimSpace(string(v))
	}
	return nil
}

// startEmbedded runs the Fibril server in this process (profiling mode).
func (s *serverProc) startEmbedded(cfg *Config) error {
	opts := server.DefaultOptions()
	opts.Listen = "127.0.0.1:0"
	opts.DataDir = filepath.Join(s.dir, "data")
	if cfg.Mode != "plain" {
		opts.AutoCreate = []string{">"}
	}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := server.New(opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.runDone, s.embed = cancel, make(chan error, 1), true
	go func() { s.runDone <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-s.runDone:
		return fmt.Errorf("embedded server: %w", err)
	}
	s.addr, s.pid, s.version = srv.Addr().String(), os.Getpid(), "fibril "+server.Version+" (embedded)"
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		s.prof = f
	}
	s.memProf = cfg.MemProfile
	if cfg.Trace != "" {
		f, err := os.Create(cfg.Trace)
		if err != nil {
			return err
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			return err
		}
		s.trace = f
	}
	return nil
}

func (s *serverProc) spawn(bin string, args ...string) error {
	logf, err := os.Create(s.logPath)
	if err != nil {
		return err
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stderr = logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return nil
}

func (s *serverProc) run() error {
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.cmd.Path, err)
	}
	s.pid = s.cmd.Process.Pid
	s.exited = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	return nil
}

func (s *serverProc) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// url returns the server's address as a nats:// URL.
func (s *serverProc) url() string { return "nats://" + s.addr }

// rssKiB returns the server's peak resident set size (VmHWM), 0 if unknown.
func (s *serverProc) rssKiB() int64 {
	if s.pid == 0 {
		return 0
	}
	n, _ := readVmHWM(s.pid)
	return n
}

// memSample is one reading of /proc/<pid>/status, in KiB.
type memSample struct{ hwm, anon, file int64 }

func readMem(pid int) (memSample, error) {
	var m memSample
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmHWM":
			m.hwm = n
		case "RssAnon":
			m.anon = n
		case "RssFile":
			m.file = n
		}
	}
	return m, nil
}

// startMemSampler samples the server's RssAnon and RssFile every 100 ms
// until the returned function is called, which returns the peaks (KiB).
// VmHWM alone cannot tell heap from mapped segment files (RssFile: page
// cache pages of the mmapped log, reclaimable).
func startMemSampler(pid int) func() (anon, file int64) {
	if pid == 0 {
		return func() (int64, int64) { return 0, 0 }
	}
	quit := make(chan struct{})
	var pa, pf int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if m, err := readMem(pid); err == nil {
				pa, pf = max(pa, m.anon), max(pf, m.file)
			}
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	return func() (int64, int64) {
		once.Do(func() { close(quit); wg.Wait() })
		return pa, pf
	}
}

// readVmHWM reads VmHWM (peak RSS, KiB) from /proc/<pid>/status.
func readVmHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}

func (s *serverProc) describe() ServerDesc {
	d := ServerDesc{Addr: s.addr, PID: s.pid, Version: s.version, Started: s.started}
	switch {
	case s.embed:
		d.RSSNote = "embedded: VmHWM of the bench process, clients included"
	case s.pid != 0:
		d.RSSNote = fmt.Sprintf("VmHWM of server pid %d", s.pid)
	default:
		d.RSSNote = "unknown: give --server-pid"
	}
	return d
}

// profileDone stops the CPU profile and writes the allocation profile.
func (s *serverProc) profileDone() {
	if s.trace != nil {
		trace.Stop()
		s.trace.Close()
		s.trace = nil
	}
	if s.prof != nil {
		pprof.StopCPUProfile()
		s.prof.Close()
		s.prof = nil
	}
	if s.memProf != "" {
		if f, err := os.Create(s.memProf); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
		s.memProf = ""
	}
}

// stop ends a server this run started (SIGTERM to its PID, SIGKILL after
// 10 s) and removes its data directory unless --keep-data.
func (s *serverProc) stop() {
	s.stopOne.Do(func() {
		s.profileDone()
		if s.cancel != nil {
			s.cancel()
			select {
			case <-s.runDone:
			case <-time.After(10 * time.Second):
			}
		}
		if s.cmd != nil && s.cmd.Process != nil && s.exited != nil {
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.exited:
			case <-time.After(10 * time.Second):
				_ = s.cmd.Process.Kill()
				<-s.exited
			}
		}
		if s.dir != "" && !s.keep {
			_ = os.RemoveAll(s.dir)
		}
	})
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
