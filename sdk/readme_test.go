package fibril_test

// Runs every code block of README.md (issue 31: every block of every README
// runs in the tests): the quickstart's main.go, built in a new module next to
// this repository by the README's own commands, against a new server, its
// output compared with the README's. TestREADMEConsumeRate (make -C sdk
// bench-readme, not in `make test`) runs the quickstart's consume on a
// backlog and reports its rate.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

const readmeURL = "fibril://127.0.0.1:4222"

// readmeBlock is one fenced block of README.md and the text block right
// after it (its output), if any.
type readmeBlock struct {
	lang, code, output string
}

func readmeBlocks(t testing.TB) []readmeBlock {
	t.Helper()
	src, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```\n")
	var out []readmeBlock
	for _, m := range re.FindAllSubmatch(src, -1) {
		lang, code := string(m[1]), string(m[2])
		if lang == "text" {
			if len(out) > 0 {
				out[len(out)-1].output = code
			}
			continue
		}
		out = append(out, readmeBlock{lang: lang, code: code})
	}
	return out
}

// readmeModule writes the README's main.go, pointed at url, into a new
// directory next to a link to this repository (the README's ../fibril),
// and returns that directory and the README's shell block.
func readmeModule(t testing.TB, url string, extra map[string]string) (dir, script, output string) {
	t.Helper()
	var goCode string
	for _, b := range readmeBlocks(t) {
		switch b.lang {
		case "go":
			goCode = b.code
		case "sh":
			script, output = b.code, b.output
		default:
			t.Fatalf("README block %q has no runner", b.lang)
		}
	}
	if goCode == "" || script == "" || output == "" {
		t.Fatal("README lacks its main.go, its commands or their output")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	if err := os.Symlink(root, filepath.Join(parent, "fibril")); err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(parent, "quickstart")
	files := map[string]string{"main.go": strings.ReplaceAll(goCode, readmeURL, url)}
	for k, v := range extra {
		files[k] = v
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, script, output
}

func runScript(t testing.TB, dir, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("README commands: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestREADMEQuickstart: the README's commands build and run its main.go in
// a new module, which prints what the README shows.
func TestREADMEQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own")
	}
	srv := startServer(t)
	dir, script, want := readmeModule(t, "fibril://"+srv.Addr, nil)
	if got := runScript(t, dir, script); got != want {
		t.Fatalf("the quickstart printed\n%s\nthe README shows\n%s", got, want)
	}
}

// TestREADMEConsumeRate is the benchmark of the README's consume loop, run
// by `make -C sdk bench-readme` (FIBRIL_BENCH_README=<messages>): the
// README's main.go with a test file beside it that calls its consume on a
// backlog on a new server. Never a timed test: it only reports.
func TestREADMEConsumeRate(t *testing.T) {
	n := os.Getenv("FIBRIL_BENCH_README")
	if n == "" {
		t.Skip("a benchmark: make -C sdk bench-readme")
	}
	srv := startServer(t)
	url := "fibril://" + srv.Addr
	c := connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := c.CreateTopic(ctx, "orders", fibril.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateGroup(ctx, "orders", "billing", fibril.GroupConfig{}); err != nil {
		t.Fatal(err)
	}
	var count int
	fmt.Sscan(n, &count)
	futs := make([]*fibril.PubFuture, 0, count)
	for range count {
		f, err := c.PublishAsync(ctx, "orders", []byte("1"))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rate := fmt.Sprintf(`package main

import (
	"context"
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

func TestRate(t *testing.T) {
	ctx := context.Background()
	c, err := fibril.Connect(ctx, %q)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t0 := time.Now()
	total, err := consume(ctx, c, %d)
	if err != nil || total != %d {
		t.Fatal(total, err)
	}
	el := time.Since(t0)
	t.Logf("README consume loop: %d msgs, %%.0f msgs/s acked", float64(%d)/el.Seconds())
}
`, url, count, count, count, count)
	dir, script, _ := readmeModule(t, url, map[string]string{"rate_test.go": rate})
	script = strings.Replace(script, "go run .", "go test -count=1 -run TestRate -v .", 1)
	for _, line := range strings.Split(runScript(t, dir, script), "\n") {
		if strings.Contains(line, "README consume loop") {
			t.Log(strings.TrimSpace(line))
		}
	}
}
