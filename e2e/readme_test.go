package e2e

// The READMEs' code blocks, run. Every fenced block of README.md and
// cmd/fibril/README.md is claimed by one runner, chosen by its info string
// and content; a block none claims (or an indented code block) fails the
// test, so a new example cannot go untested:
//
//   - sh: each line is a command, run with the built binary as `fibril`
//     (`go run ./cmd/fibril` is rewritten to it). `fibril serve` starts in
//     the background (on FIBRIL_LISTEN=127.0.0.1:0 unless the line names a
//     port), waits for its ready line and is stopped with SIGINT at the end
//     of the block, which must exit 0. `make <target>` is checked with
//     `make -n` (the targets themselves are the long runs). Anything else
//     must exit 0.
//   - console: `$ ` lines are commands (as for sh, against a fresh server
//     through FIBRIL_URL); the lines after each are its output, compared
//     line by line: `…` inside a line matches any text, a line that is only
//     `…` any number of lines.
//   - no info string, lines of `C:`/`S:`/`#`: a wire session, replayed on a
//     fresh server and data folder (`…` as above).
//   - json: valid JSON; a ready-line sample has the keys of the ready line
//     the sh block before it printed.
//   - text starting "Fibril ": a screen of `fibril tui`, each line in the
//     shape the TUI draws.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mdBlock is one fenced code block of a Markdown file.
type mdBlock struct {
	info  string
	lines []string
	line  int // of the opening fence, 1-based
}

// readBlocks returns the fenced blocks of a Markdown file, and the line
// numbers of indented code blocks (which the runners do not take).
func readBlocks(t *testing.T, path string) (blocks []mdBlock, indented []int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	inList := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if info, ok := strings.CutPrefix(l, "```"); ok {
			blk := mdBlock{info: strings.TrimSpace(info), line: i + 1}
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				blk.lines = append(blk.lines, lines[i])
			}
			blocks = append(blocks, blk)
			continue
		}
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "- ") || strings.HasPrefix(trimmed, "* ") || strings.HasPrefix(trimmed, "|") {
			inList = true
		} else if trimmed == "" {
			inList = false
		}
		// An indented code block: four spaces after a blank line, not a
		// list item's continuation.
		if !inList && strings.HasPrefix(l, "    ") && i > 0 && strings.TrimSpace(lines[i-1]) == "" {
			indented = append(indented, i+1)
		}
	}
	return blocks, indented
}

// TestREADMECodeBlocksRun runs every code block of the root and CLI READMEs.
func TestREADMECodeBlocksRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := fibrilBinary(t)
	binDir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(binDir, "fibril")); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"README.md", "cmd/fibril/README.md"} {
		blocks, indented := readBlocks(t, filepath.Join("..", file))
		for _, l := range indented {
			t.Errorf("%s:%d: an indented code block; fence it with a language so this test runs it", file, l)
		}
		d := &docRun{t: t, binDir: binDir}
		for _, b := range blocks {
			name := fmt.Sprintf("%s:%d", file, b.line)
			t.Run(name, func(t *testing.T) {
				d.t = t
				switch {
				case b.info == "sh":
					d.sh(b)
				case b.info == "console":
					d.console(b)
				case b.info == "json":
					d.json(b)
				case b.info == "" && isSession(b.lines):
					d.session(b)
				case b.info == "text" && len(b.lines) > 0 && strings.HasPrefix(b.lines[0], "Fibril "):
					tuiScreen(t, b.lines)
				default:
					t.Fatalf("no runner for this block (info %q): give it one of sh, console, json, a C:/S: session or a TUI screen", b.info)
				}
			})
		}
	}
}

// docRun carries what one README's blocks share: the ready line the last
// sh block's server printed (for the json sample after it).
type docRun struct {
	t         *testing.T
	binDir    string
	lastReady map[string]any
}

func (d *docRun) env(extra ...string) []string {
	env := append(os.Environ(), "PATH="+d.binDir+string(os.PathListSeparator)+os.Getenv("PATH"), "FIBRIL_LISTEN=127.0.0.1:0")
	return append(env, extra...)
}

// bgServer is a `fibril serve` a block started.
type bgServer struct {
	cmd   *exec.Cmd
	first string // its first stdout line
	log   *bytes.Buffer
}

var listenAddrRe = regexp.MustCompile(`listening on nats://(\S+?),`)

// addr is where the server listens, from its ready line or sentence.
func (s *bgServer) addr() string {
	var r readyLine
	if json.Unmarshal([]byte(s.first), &r) == nil && r.Addr != "" {
		return r.Addr
	}
	if m := listenAddrRe.FindStringSubmatch(s.first); m != nil {
		return m[1]
	}
	return ""
}

// startServe runs a serve command line in the background in dir and waits
// for its first line on stdout.
func (d *docRun) startServe(cmdline, dir string, env []string) *bgServer {
	t := d.t
	t.Helper()
	s := &bgServer{log: &bytes.Buffer{}}
	s.cmd = exec.Command("bash", "-c", "exec "+cmdline)
	s.cmd.Dir, s.cmd.Env, s.cmd.Stderr = dir, env, s.log
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cmd.Process.Kill(); _ = s.cmd.Wait() })
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-first:
		if !ok {
			t.Fatalf("%s: exited without a ready line: %s", cmdline, s.log)
		}
		s.first = l
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no ready line in 30s: %s", cmdline, s.log)
	}
	return s
}

// stop sends SIGINT (Ctrl+C) and expects a clean exit.
func (s *bgServer) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after Ctrl+C: %v: %s", err, s.log)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("did not stop on Ctrl+C: %s", s.log)
	}
}

// command is a README command line as run here.
func command(line string) string {
	return strings.ReplaceAll(line, "go run ./cmd/fibril", "fibril")
}

func isServe(cmd string) bool {
	return strings.HasPrefix(cmd, "fibril serve") || strings.HasPrefix(cmd, "fibril try-cluster")
}

func (d *docRun) sh(b mdBlock) {
	t := d.t
	dir := t.TempDir()
	env := d.env("TMP=" + dir)
	for _, raw := range b.lines {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cmd := command(line)
		switch {
		case isServe(cmd):
			s := d.startServe(cmd, dir, env)
			if s.addr() == "" {
				t.Fatalf("%s: ready line %q names no address", line, s.first)
			}
			d.lastReady = nil
			_ = json.Unmarshal([]byte(s.first), &d.lastReady)
			// A second serve in the same block may want the same port or
			// data: stop the first (as the reader would) before going on.
			s.stop(t)
		case strings.HasPrefix(cmd, "make "):
			c := exec.Command("bash", "-c", "make -n "+strings.TrimPrefix(cmd, "make "))
			c.Dir = ".."
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("%s: make -n: %v\n%s", line, err, out)
			}
		default:
			c := exec.Command("bash", "-c", cmd)
			c.Dir, c.Env = dir, env
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
		}
	}
}

func (d *docRun) console(b mdBlock) {
	t := d.t
	dir := t.TempDir()
	s := d.startServe("fibril serve --listen 127.0.0.1:0 --data "+filepath.Join(dir, "data")+" --ready-json", dir, d.env())
	env := d.env("FIBRIL_URL=nats://" + s.addr())
	type step struct {
		cmd  string
		want []string
	}
	var steps []step
	for _, l := range b.lines {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			steps = append(steps, step{cmd: command(c)})
			continue
		}
		if len(steps) == 0 {
			t.Fatalf("output %q before any command", l)
		}
		steps[len(steps)-1].want = append(steps[len(steps)-1].want, l)
	}
	for _, st := range steps {
		c := exec.Command("bash", "-c", st.cmd)
		c.Dir, c.Env = dir, env
		out, err := c.CombinedOutput()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatal(err)
		}
		got := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		if len(out) == 0 {
			got = nil
		}
		if !matchLines(st.want, got) {
			t.Errorf("$ %s\nprinted:\n%s\nthe README shows:\n%s", st.cmd, strings.Join(got, "\n"), strings.Join(st.want, "\n"))
		}
	}
	s.stop(t)
}

func (d *docRun) json(b mdBlock) {
	t := d.t
	var v any
	if err := json.Unmarshal([]byte(strings.Join(b.lines, "\n")), &v); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok || m["addr"] == nil {
		return // the config file example: TestREADMEConfigExampleLoads (cmd/fibril) loads it
	}
	if d.lastReady == nil {
		t.Fatal("a ready-line sample with no --ready-json server before it")
	}
	keys := func(m map[string]any) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return ks
	}
	if got, want := keys(d.lastReady), keys(m); !slicesEqual(got, want) {
		t.Fatalf("the ready line has keys %v, the README's sample %v", got, want)
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

// isSession reports a block of C:/S: lines (and # comments).
func isSession(lines []string) bool {
	n := 0
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "C: "), strings.HasPrefix(l, "S: "), l == "S:":
			n++
		case strings.HasPrefix(l, "#"), l == "":
		default:
			return false
		}
	}
	return n > 0
}

// session replays a C:/S: block on a fresh server and data folder.
func (d *docRun) session(b mdBlock) {
	t := d.t
	dir := t.TempDir()
	s := d.startServe("fibril serve --listen 127.0.0.1:0 --data "+filepath.Join(dir, "data")+" --ready-json", dir, d.env())
	nc, err := net.DialTimeout("tcp", s.addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	for _, l := range b.lines {
		switch {
		case strings.HasPrefix(l, "C: "):
			if _, err := nc.Write([]byte(strings.TrimPrefix(l, "C: ") + "\r\n")); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(l, "S:"):
			want := strings.TrimPrefix(strings.TrimPrefix(l, "S:"), " ")
			_ = nc.SetReadDeadline(time.Now().Add(15 * time.Second))
			got, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("waiting for %q: %v", want, err)
			}
			got = strings.TrimSuffix(got, "\r\n")
			if !matchLine(want, got) {
				t.Fatalf("server said %q, the README shows %q", got, want)
			}
		}
	}
	s.stop(t)
}

// matchLine matches one line; "…" in want matches any text.
func matchLine(want, got string) bool {
	parts := strings.Split(want, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(got)
}

// matchLines matches lines; a want line that is only "…" (indented or not) matches any
// number of lines.
func matchLines(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "…" {
		for i := 0; i <= len(got); i++ {
			if matchLines(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && matchLine(want[0], got[0]) && matchLines(want[1:], got[1:])
}

// tuiScreen checks each line of a TUI screen sample against the shapes
// tui.View draws.
func tuiScreen(t *testing.T, lines []string) {
	shapes := []*regexp.Regexp{
		regexp.MustCompile(`^Fibril \S+ · \S+ · server \S+ · updated \d\d:\d\d:\d\d$`),
		regexp.MustCompile(`^\[p\] publish \d+  \[c\] consume\+ack \d+  \[t\] traffic \((ON|off)\)  \[↑/↓\] select topic  \[q\] quit$`),
		regexp.MustCompile(`^c and t consume as group fibril-tui-demo, the TUI's own \(deleted on quit\): other groups' messages are never acked$`),
		regexp.MustCompile(`^$`),
		regexp.MustCompile(`^[> ] \S+ +published \d+ +[\d.]+/s  retained \d+ +[▁▂▃▄▅▆▇█ ]*$`),
		regexp.MustCompile(`^    └ \S+ +ready \d+ +in flight \d+ +acked \d+ +dead \d+ +[\d.]+/s [▁▂▃▄▅▆▇█ ]*$`),
		regexp.MustCompile(`^(traffic on \S+/fibril-tui-demo: published \d+, acked \d+, \d+ in flight|published \d+ to \S+|consumed and acked \d+ from \S+/fibril-tui-demo \(the TUI's own group\))$`),
	}
	for i, l := range lines {
		ok := false
		for _, re := range shapes {
			ok = ok || re.MatchString(strings.TrimRight(l, " "))
		}
		if !ok {
			t.Errorf("screen line %d is not something the TUI draws: %q", i+1, l)
		}
	}
}
