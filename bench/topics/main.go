// Command topics measures what topics cost: it starts `fibril serve` on
// loopback with an empty data directory, creates N topics through the Go
// SDK (from -conns connections at once), publishes one message to each,
// and reports the server's resident memory (VmRSS), its open files, the
// data directory's disk use and the create rate. Linux only (it reads
// /proc). It is a benchmark, not a test: `make test` does not run it.
//
//	go run ./bench/topics -n 10000
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

func main() {
	n := flag.Int("n", 10000, "topics to create, one message each")
	conns := flag.Int("conns", 4, "connections creating topics at once")
	bin := flag.String("bin", "", "fibril binary (empty: go build ./cmd/fibril into a temporary directory)")
	data := flag.String("data", "", "data directory (empty: a new temporary one, removed after)")
	flag.Parse()
	cfg := config{n: *n, conns: *conns, bin: *bin, data: *data, serveArgs: flag.Args(), pkg: "./cmd/fibril", out: os.Stdout}
	if _, err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "topics:", err)
		os.Exit(1)
	}
}

// config is one run: n topics from conns connections; the server binary
// (built from pkg when empty), its data directory (a temporary one when
// empty) and extra `fibril serve` arguments.
type config struct {
	n, conns       int
	bin, data, pkg string
	serveArgs      []string
	out            io.Writer
	settled        func(usage) bool // done waiting once true, or after 10 s (nil: 2 s)
}

// usage is the server's cost at one moment.
type usage struct {
	rss, disk int64
	fds       int
}

func (u usage) String() string {
	return fmt.Sprintf("rss %s  fds %d  disk %s", mib(u.rss), u.fds, mib(u.disk))
}

// result is what a run measured: after the creates, and once settled.
type result struct {
	after, settled usage
	rate           float64 // topics created (and published to) per second
}

func run(cfg config) (result, error) {
	n, conns, bin, data := cfg.n, cfg.conns, cfg.bin, cfg.data
	var res result
	tmp, err := os.MkdirTemp("", "fibril-topics-bench")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		bin = filepath.Join(tmp, "fibril")
		if out, err := exec.Command("go", "build", "-o", bin, cfg.pkg).CombinedOutput(); err != nil {
			return res, fmt.Errorf("go build %s: %v\n%s", cfg.pkg, err, out)
		}
	}
	if data == "" {
		data = filepath.Join(tmp, "data")
	}
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data", data, "--ready-json", "--log-level", "warn"}, cfg.serveArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return res, err
	}
	if err := cmd.Start(); err != nil {
		return res, err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	var ready struct {
		Addr string `json:"addr"`
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return res, fmt.Errorf("no ready line: %w", err)
	}
	if err := json.Unmarshal([]byte(line), &ready); err != nil {
		return res, fmt.Errorf("ready line %q: %w", line, err)
	}
	pid := cmd.Process.Pid
	w := cfg.out
	fmt.Fprintf(w, "server pid %d on %s, data %s, %d topics from %d connections\n", pid, ready.Addr, data, n, conns)
	fmt.Fprintf(w, "before:  %s\n", sample(pid, data))

	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	t0 := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := fibril.Connect(ctx, "nats://"+ready.Addr, fibril.WithRequestTimeout(time.Minute))
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				name := fmt.Sprintf("bench.t%d", i)
				if _, err := c.CreateTopic(ctx, name, fibril.TopicConfig{}); err != nil {
					errs <- fmt.Errorf("create %s: %w", name, err)
					return
				}
				if _, err := c.Publish(ctx, name, []byte("one message")); err != nil {
					errs <- fmt.Errorf("publish to %s: %w", name, err)
					return
				}
				if i > 0 && i%1000 == 0 {
					fmt.Fprintf(w, "  %6d topics  %s  %.0f topics/s\n", i, sample(pid, data), float64(i)/time.Since(t0).Seconds())
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	el := time.Since(t0)
	res.rate = float64(n) / el.Seconds()
	res.after = sample(pid, data)
	fmt.Fprintf(w, "after:   %s\n", res.after)
	fmt.Fprintf(w, "created %d topics (one message each) in %v: %.0f topics/s\n", n, el.Round(time.Millisecond), res.rate)
	// Idle partitions close their logs in the background.
	settled := cfg.settled
	if settled == nil {
		settled = func(usage) bool { return false }
	}
	deadline := time.Now().Add(2 * time.Second)
	if cfg.settled != nil {
		deadline = time.Now().Add(10 * time.Second)
	}
	for {
		res.settled = sample(pid, data)
		if settled(res.settled) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(w, "settled: %s\n", res.settled)
	return res, nil
}

// sample measures the server process and its data directory now.
func sample(pid int, data string) usage {
	return usage{rss: rssBytes(pid), fds: fdCount(pid), disk: diskBytes(data)}
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// rssBytes reads VmRSS from /proc/<pid>/status.
func rssBytes(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb << 10
		}
	}
	return -1
}

func fdCount(pid int) int {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(es)
}

// diskBytes is what du reports: the blocks allocated to every file.
func diskBytes(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	return total
}
