package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOpenFilesLimitIsTooManyFiles is the regression test for "at the file
// limit the server logs too many open files at INFO and publishers hear
// nothing" (issue 24): fibril serve, its RLIMIT_NOFILE lowered to a few
// dozen descriptors above what it holds, is sent TOPIC CREATEs until one is
// refused. The refusal is too_many_files (retriable; an internal error
// before), logged at ERROR once, counted in /metrics; the topics made before
// still take publishes, and once topics are deleted (their descriptors
// freed) a create works again.
func TestOpenFilesLimitIsTooManyFiles(t *testing.T) {
	httpAddr := freeAddr(t)
	srv := startFibril(t, t.TempDir(), "--http", httpAddr)
	pid := srv.PID()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	lim := unix.Rlimit{Cur: uint64(len(fds) + 40), Max: uint64(len(fds) + 40)}
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lim, &old); err != nil {
		t.Skipf("prlimit: %v", err)
	}
	nc, err := net.DialTimeout("tcp", srv.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(nc)
	do := func(cmd string) string {
		t.Helper()
		if _, err := nc.Write([]byte(cmd)); err != nil {
			t.Fatal(err)
		}
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("after %q: %v", cmd, err)
			}
			if !strings.HasPrefix(line, "INFO") && !strings.HasPrefix(line, "PING") {
				return strings.TrimSpace(line)
			}
		}
	}
	if got := do("CONNECT {\"fibril\":1}\r\n"); got != "+OK" {
		t.Fatalf("CONNECT: %q", got)
	}
	made, refused := 0, ""
	for i := range 100 {
		got := do(fmt.Sprintf("TOPIC CREATE fl%d\r\n", i))
		if !strings.HasPrefix(got, "+OK") {
			refused = got
			break
		}
		made++
	}
	if made == 0 || refused == "" {
		t.Fatalf("made %d topics, refusal %q", made, refused)
	}
	if !strings.HasPrefix(refused, "-ERR 'too_many_files") {
		t.Fatalf("at the open-files limit: %q, want too_many_files", refused)
	}
	for i := range made {
		if got := do(fmt.Sprintf("PUB fl%d 2\r\nhi\r\n", i)); !strings.HasPrefix(got, "+OK 0:") {
			t.Fatalf("publish to fl%d at the limit: %q", i, got)
		}
	}
	if n := strings.Count(srv.Logs(), "open-files limit reached"); n != 1 || !strings.Contains(srv.Logs(), "ERROR") {
		t.Fatalf("the limit was reported %d times, want once a minute", n)
	}
	metrics := get(t, "http://"+httpAddr+"/metrics")
	if !strings.Contains(metrics, "fibril_file_limit_errors_total 1") {
		t.Fatalf("/metrics lacks fibril_file_limit_errors_total 1:\n%s", grepLines(metrics, "file_limit"))
	}
	for i := range 3 {
		if got := do(fmt.Sprintf("TOPIC DELETE fl%d\r\n", i)); !strings.HasPrefix(got, "+OK") {
			t.Fatalf("delete fl%d: %q", i, got)
		}
	}
	if got := do("TOPIC CREATE again\r\n"); !strings.HasPrefix(got, "+OK") {
		t.Fatalf("create after descriptors were freed: %q", got)
	}
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
