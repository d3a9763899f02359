package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/testserver"
	"github.com/fibrilmq/fibril/server"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestServeOptionsPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "fibril.json")
	if err := os.WriteFile(cfg, []byte(`{"max_payload": 2000, "listen": "127.0.0.1:5000", "ping_interval": "3s",
		"auto_create": ["orders.>", "logs.*"], "users": [{"name": "u", "password_bcrypt": "$2a$04$abcdefghijklmnopqrstuu5Xo0Hj0J3e5nTBL2Qy4yGm1bXc5Tgi"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	def := server.DefaultOptions()
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		payload int
		listen  string
	}{
		{"defaults", nil, nil, def.MaxPayload, "127.0.0.1:4222"},
		{"file", []string{"--config", cfg}, nil, 2000, "127.0.0.1:5000"},
		{"env over file", []string{"--config", cfg}, map[string]string{"FIBRIL_MAX_PAYLOAD": "3000"}, 3000, "127.0.0.1:5000"},
		{"flag over env", []string{"--config", cfg, "--max-payload", "4000"}, map[string]string{"FIBRIL_MAX_PAYLOAD": "3000"}, 4000, "127.0.0.1:5000"},
		{"config from env", nil, map[string]string{"FIBRIL_CONFIG": cfg, "FIBRIL_LISTEN": "127.0.0.1:0"}, 2000, "127.0.0.1:0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, _, err := serveOptions(tc.args, env(tc.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if o.MaxPayload != tc.payload || o.Listen != tc.listen {
				t.Fatalf("payload %d listen %s, want %d %s", o.MaxPayload, o.Listen, tc.payload, tc.listen)
			}
		})
	}
	o, sc, err := serveOptions([]string{"--config", cfg, "--ready-json", "--log-level", "debug"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !sc.readyJSON || sc.logLevel != slog.LevelDebug || strings.Join(o.AutoCreate, " ") != "orders.> logs.*" || o.PingInterval != 3*time.Second || len(o.Users) != 1 {
		t.Fatalf("got %+v %+v", sc, o)
	}
	o, _, err = serveOptions([]string{"--segment-size", "1048576"}, env(map[string]string{"FIBRIL_EVENT_SEGMENT_SIZE": "65536"}), io.Discard)
	if err != nil || o.Engine.SegmentSize != 1<<20 || o.Engine.EventSegmentSize != 64<<10 {
		t.Fatalf("segment sizes %d/%d: %v", o.Engine.SegmentSize, o.Engine.EventSegmentSize, err)
	}
}

func TestServeOptionsErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(bad, []byte(`{"no_such_key": 1}`), 0o600)
	cases := [][]string{
		{"--max-payload", "lots"},
		{"--ping-interval", "soon"},
		{"--config", bad},
		{"--config", filepath.Join(dir, "missing.json")},
		{"stray"},
	}
	for _, args := range cases {
		if _, _, err := serveOptions(args, env(nil), io.Discard); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	if code := run([]string{"serve", "--max-connections", "0"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("invalid option exit code %d, want 2", code)
	}
	for _, flag := range []string{"--segment-size", "--event-segment-size"} {
		if code := run([]string{"serve", flag, "-5"}, io.Discard, io.Discard); code != 2 {
			t.Errorf("%s -5: exit code %d, want 2", flag, code)
		}
	}
	if code := run([]string{"nope"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("unknown command exit code %d, want 2", code)
	}
}

func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("fibril %v: exit %d: %s", args, code, errb.String())
	}
	return out.String()
}

func TestClientCommands(t *testing.T) {
	addr := testserver.Addr(t)
	if out := runOK(t, "topics", "-s", addr, "create", "jobs", `{"partitions":2}`); !strings.Contains(out, `"name": "jobs"`) {
		t.Fatalf("create: %s", out)
	}
	if out := runOK(t, "pub", "-s", addr, "jobs", "first"); !strings.Contains(out, "stored in partition") {
		t.Fatalf("pub: %s", out)
	}
	if out := runOK(t, "pub", "-s", addr, "-plain", "_INBOX.x", "plain"); !strings.Contains(out, "no durable topic") {
		t.Fatalf("plain pub: %s", out)
	}
	// TestPubToNoTopicIsAnError: a typo stores nothing and says so.
	var typo bytes.Buffer
	if code := run([]string{"pub", "-s", addr, "nosuchtopic", "x"}, io.Discard, &typo); code != 1 || !strings.Contains(typo.String(), `no topic captures "nosuchtopic"`) {
		t.Fatalf("pub to no topic: exit %d: %s", code, typo.String())
	}
	if out := runOK(t, "topics", "-s", addr); !strings.Contains(out, `"jobs"`) {
		t.Fatalf("list: %s", out)
	}
	out := runOK(t, "poll", "-s", addr, "-n", "5", "-wait", "1000", "-ack", "jobs", "g")
	if !strings.Contains(out, "[jobs] reply=$F.") || !strings.Contains(out, "first") || !strings.Contains(out, "1 message(s)") || !strings.Contains(out, "acked") {
		t.Fatalf("poll: %s", out)
	}
	runOK(t, "pub", "-s", addr, "jobs", "second")
	if out := runOK(t, "sub", "-s", addr, "-q", "g", "-n", "1", "jobs"); !strings.Contains(out, "second") {
		t.Fatalf("sub: %s", out)
	}
	var errb bytes.Buffer
	if code := run([]string{"poll", "-s", addr, "nope", "g"}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "unknown_topic") {
		t.Fatalf("poll unknown topic: %d %s", code, errb.String())
	}

	// TestPubMsgIDDuplicate: a repeated -msg-id is reported as a
	// duplicate of the first, at its position.
	first := runOK(t, "pub", "-s", addr, "-msg-id", "m-1", "jobs", "once")
	if again := runOK(t, "pub", "-s", addr, "-msg-id", "m-1", "jobs", "once"); !strings.HasPrefix(again, `duplicate: message id "m-1" is stored in`) ||
		!strings.HasSuffix(again, strings.TrimPrefix(first, "stored")) {
		t.Fatalf("pub -msg-id twice: %q then %q", first, again)
	}
	runOK(t, "poll", "-s", addr, "-n", "5", "-wait", "1000", "-ack", "jobs", "g")

	// A keyed publish carries Fibril-Key, which poll shows.
	runOK(t, "pub", "-s", addr, "-key", "k1", "jobs", "keyed")
	if out := runOK(t, "poll", "-s", addr, "-wait", "1000", "jobs", "g"); !strings.Contains(out, `headers="Fibril-Key: k1\r\n"`) || !strings.Contains(out, "keyed") {
		t.Fatalf("poll of a keyed message: %s", out)
	}
	if out := runOK(t, "topics", "-s", addr, "info", "jobs"); !strings.Contains(out, `"name": "jobs"`) || !strings.Contains(out, `"partitions"`) {
		t.Fatalf("info: %s", out)
	}
	if out := runOK(t, "topics", "-s", addr, "create", "archive", `{"compression":"zstd"}`); !strings.Contains(out, `"compression": "zstd"`) {
		t.Fatalf("create with compression: %s", out)
	}
	if out := runOK(t, "topics", "-s", addr, "info", "jobs"); !strings.Contains(out, `"compression": "none"`) {
		t.Fatalf("info shows no default compression: %s", out)
	}
	errb.Reset()
	if code := run([]string{"topics", "-s", addr, "create", "bad", `{"compression":"lz4"}`}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "invalid_config") {
		t.Fatalf("create with an unknown compression: %d %s", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"topics", "-s", addr, "create", "bad", `{"bogus":1}`}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "invalid_json") {
		t.Fatalf("create with an unknown field: %d %s", code, errb.String())
	}
	// TestGroupsCommand: groups are managed from the CLI as topics are.
	if out := runOK(t, "groups", "-s", addr, "create", "jobs", "replay", `{"start":"seq","start_seq":2}`); !strings.Contains(out, `"name": "replay"`) || !strings.Contains(out, `"start_seq": 2`) {
		t.Fatalf("groups create: %s", out)
	}
	if out := runOK(t, "groups", "-s", addr, "list", "jobs"); !strings.Contains(out, `"topic": "jobs"`) || !strings.Contains(out, `"g"`) || !strings.Contains(out, `"replay"`) {
		t.Fatalf("groups list: %s", out)
	}
	if out := runOK(t, "groups", "-s", addr, "info", "jobs", "replay"); !strings.Contains(out, `"start": "seq"`) {
		t.Fatalf("groups info: %s", out)
	}
	errb.Reset()
	if code := run([]string{"groups", "-s", addr, "create", "jobs", "bad", `{"start":"seq"}`}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "invalid_config") {
		t.Fatalf("groups create without start_seq: %d %s", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"groups", "-s", addr, "create", "jobs"}, io.Discard, &errb); code != 2 {
		t.Fatalf("groups create without a group name: exit %d %s", code, errb.String())
	}
	if out := runOK(t, "groups", "-s", addr, "delete", "jobs", "replay"); !strings.Contains(out, `"group": "replay"`) {
		t.Fatalf("groups delete: %s", out)
	}
	if out := runOK(t, "groups", "-s", addr, "list", "jobs"); strings.Contains(out, `"replay"`) {
		t.Fatalf("groups list after delete: %s", out)
	}
	errb.Reset()
	if code := run([]string{"groups", "-s", addr, "info", "jobs", "nosuch"}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "unknown_group") {
		t.Fatalf("groups info of no group: %d %s", code, errb.String())
	}
	if out := runOK(t, "topics", "-s", addr, "delete", "jobs"); !strings.Contains(out, `"topic": "jobs"`) {
		t.Fatalf("delete: %s", out)
	}
	if out := runOK(t, "topics", "-s", addr); strings.Contains(out, `"jobs"`) || !strings.Contains(out, `"topics": [`) {
		t.Fatalf("list after delete: %s", out)
	}

	// Without -q, sub is a plain subscription (wildcards allowed): it gets
	// what is published from the moment it is in place.
	var subOut, subErr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run([]string{"sub", "-s", addr, "-n", "1", "_INBOX.cli.*"}, &subOut, &subErr) }()
	code := -1
	testserver.WaitFor(t, 10*time.Second, "the plain sub to print a message", func() bool {
		runOK(t, "pub", "-s", addr, "-plain", "_INBOX.cli.x", "plain-hello")
		select {
		case code = <-done:
			return true
		default:
			return false
		}
	})
	if code != 0 || !strings.Contains(subOut.String(), "[_INBOX.cli.x] plain-hello") || strings.Contains(subOut.String(), "reply=") {
		t.Fatalf("plain sub: exit %d: %q %s", code, subOut.String(), subErr.String())
	}
}

// TestServeHTTPReadyJSON starts `fibril serve --http 127.0.0.1:0
// --ready-json` as the real binary and checks that the ready line names the
// admin listener, which answers /readyz and, with the token, /api/topics.
func TestServeHTTPReadyJSON(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fibril")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--data", t.TempDir(), "--ready-json", "--token", "tok")
	cmd.Env = append(os.Environ(), "FIBRIL_HTTP=") // the flag wins anyway
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
	}()
	var ready struct {
		Addr string `json:"addr"`
		HTTP string `json:"http"`
	}
	select {
	case l := <-line:
		if err := json.Unmarshal([]byte(l), &ready); err != nil || ready.Addr == "" || !strings.HasPrefix(ready.HTTP, "http://127.0.0.1:") {
			t.Fatalf("ready line %q: %v", l, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no ready line in 20s")
	}
	get := func(path, token string) int {
		req, _ := http.NewRequest(http.MethodGet, ready.HTTP+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := get("/readyz", ""); code != 200 {
		t.Fatalf("readyz: %d", code)
	}
	if code := get("/api/topics", ""); code != http.StatusUnauthorized {
		t.Fatalf("api without token: %d", code)
	}
	if code := get("/api/topics", "tok"); code != 200 {
		t.Fatalf("api with token: %d", code)
	}
}

func TestServeOptionsHTTP(t *testing.T) {
	o, _, err := serveOptions(nil, env(map[string]string{"FIBRIL_HTTP": "127.0.0.1:8222"}), io.Discard)
	if err != nil || o.HTTPListen != "127.0.0.1:8222" {
		t.Fatalf("env: %q %v", o.HTTPListen, err)
	}
	if o, _, _ := serveOptions(nil, env(nil), io.Discard); o.HTTPListen != "" {
		t.Fatalf("admin listener on by default: %q", o.HTTPListen)
	}
	cfg := filepath.Join(t.TempDir(), "c.json")
	_ = os.WriteFile(cfg, []byte(`{"http": "127.0.0.1:9000"}`), 0o600)
	if o, _, err := serveOptions([]string{"--config", cfg}, env(nil), io.Discard); err != nil || o.HTTPListen != "127.0.0.1:9000" {
		t.Fatalf("config: %q %v", o.HTTPListen, err)
	}
}

func TestTUICommand(t *testing.T) {
	addr := testserver.Addr(t)
	var out, errb bytes.Buffer
	// "q" quits at once; the UI has drawn the server's topics by then.
	if code := runTUI([]string{"-s", addr, "-alt-screen=false", "-interval", "100ms"}, strings.NewReader("q"), &out, &errb); code != 0 {
		t.Fatalf("tui exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "Fibril "+server.Version) {
		t.Fatalf("tui screen lacks the server header: %q", out.String())
	}
	if code := runTUI([]string{"-s", "127.0.0.1:1", "-timeout", "1s"}, strings.NewReader("q"), io.Discard, io.Discard); code != 1 {
		t.Fatalf("tui against nothing: exit %d, want 1", code)
	}
	if code := runTUI([]string{"-interval", "1ms"}, strings.NewReader("q"), io.Discard, io.Discard); code != 2 {
		t.Fatalf("tui with a bad interval: exit %d, want 2", code)
	}
}

// TestLoggerLeavesOutNil: the start-up line names a listener only when it
// is on; other values, zero ones included, are kept.
func TestLoggerLeavesOutNil(t *testing.T) {
	var nilAddr *net.TCPAddr
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8222}
	for _, tc := range []struct {
		name     string
		args     []any
		want     string
		wantNone []string
	}{
		{"listeners off", []any{"addr", addr, "tls", net.Addr(nil), "http", nilAddr}, `msg=listening addr=127.0.0.1:8222`, []string{"tls=", "http=", "<nil>"}},
		{"http on", []any{"tls", net.Addr(nil), "http", net.Addr(addr)}, `msg=listening http=127.0.0.1:8222`, []string{"tls=", "<nil>"}},
		{"zero values kept", []any{"n", 0, "s", "", "b", false}, `msg=listening n=0 s="" b=false`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			newLogger(&buf, slog.LevelInfo).Info("listening", tc.args...)
			out := buf.String()
			if !strings.Contains(out, tc.want+"\n") {
				t.Errorf("got %q, want it to end with %q", out, tc.want)
			}
			for _, bad := range tc.wantNone {
				if strings.Contains(out, bad) {
					t.Errorf("got %q, which has %q", out, bad)
				}
			}
		})
	}
}

// TestREADMEConfigExampleLoads: the config file example of README.md
// (Configuration) loads and validates, users and roles included.
func TestREADMEConfigExampleLoads(t *testing.T) {
	doc, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```json\n{\n  \"listen\"")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no config example in README.md")
	}
	cfg := filepath.Join(t.TempDir(), "fibril.json")
	if err := os.WriteFile(cfg, []byte("{\n  \"listen\""+block), 0o600); err != nil {
		t.Fatal(err)
	}
	o, _, err := serveOptions([]string{"--config", cfg, "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--tls-listen", ""}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Users) != 3 || o.Users[1].Role != "monitor" || o.Users[2].Role != "admin" {
		t.Fatalf("users %+v", o.Users)
	}
	if _, err := server.New(o); err != nil {
		t.Fatalf("the example does not validate: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"users":[{"name":"u","password_bcrypt":"$2a$04$x","rol":"admin"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := serveOptions([]string{"--config", bad}, env(nil), io.Discard); err == nil {
		t.Fatal("a misspelt user key was accepted")
	}
}

// TestUsageListsArgumentsAndRealFlags: `fibril -h` advertises no flag a
// command lacks (it listed `pub [-confirm]`), and each command's -h exits
// 0 listing its positional arguments and flags.
func TestUsageListsArgumentsAndRealFlags(t *testing.T) {
	top := runOK(t, "-h")
	if strings.Contains(top, "-confirm") {
		t.Errorf("usage advertises -confirm:\n%s", top)
	}
	for _, c := range commands {
		if !strings.Contains(top, "  "+c.name+" ") {
			t.Errorf("usage does not list %s", c.name)
		}
		if c.name == "version" {
			continue
		}
		var out, errb bytes.Buffer
		if code := run([]string{c.name, "-h"}, &out, &errb); code != 0 {
			t.Errorf("fibril %s -h: exit %d", c.name, code)
		}
		help := errb.String()
		if !strings.HasPrefix(help, "usage: fibril "+c.name+" ") || !strings.Contains(help, "\nflags:\n") {
			t.Errorf("fibril %s -h:\n%s", c.name, help)
		}
		for _, a := range c.args {
			if !strings.Contains(help, "  "+a[0]+" ") {
				t.Errorf("fibril %s -h does not list the argument %s:\n%s", c.name, a[0], help)
			}
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"pub", "-confirm", "x", "y"}, &out, &errb); code != 2 {
		t.Errorf("pub -confirm: exit %d, want 2 (no such flag)", code)
	}
}

// TestErrorsPrintOnce: a server's refusal prints as one line,
// "fibril <cmd>: <code>: <text>: <detail>", with no prefix repeated (it was
// "fibril topics: fibril: TOPIC INFO nosuch: fibril: unknown_topic: no such
// topic: fibril: unknown_topic: no such topic: nosuch").
func TestErrorsPrintOnce(t *testing.T) {
	addr := testserver.Addr(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"topics", "-s", addr, "info", "nosuch"}, "fibril topics: unknown_topic: no such topic: \"nosuch\"\n"},
		{[]string{"topics", "-s", "127.0.0.1:1"}, "fibril topics: cannot connect to 127.0.0.1:1: connection refused (is the server running? set -s or FIBRIL_URL)\n"},
		{[]string{"poll", "-s", addr, "nosuch", "g"}, "fibril poll: unknown_topic: no such topic: \"nosuch\"\n"},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != 1 || errb.String() != tc.want {
			t.Errorf("fibril %v: exit %d, stderr %q, want 1 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

// TestServeChecksThePortFirst: with the port taken, serve exits 1 saying
// so and creates no data folder (it used to leave ./fibril-data behind).
func TestServeChecksThePortFirst(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := filepath.Join(t.TempDir(), "fibril-data")
	var out, errb bytes.Buffer
	code := run([]string{"serve", "--listen", ln.Addr().String(), "--data", data}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "address already in use") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("serve created %s although the port was taken: %v", data, err)
	}
}

func TestVersionLine(t *testing.T) {
	out := runOK(t, "version")
	if !strings.HasPrefix(out, "fibril "+server.Version+" (commit ") || !strings.Contains(out, ", built ") {
		t.Fatalf("version: %q", out)
	}
}

// TestTopicsRequeueCommand: `fibril topics requeue` moves dead letters
// back, as the JSON picks, and prints the answer.
func TestTopicsRequeueCommand(t *testing.T) {
	addr := testserver.Addr(t)
	runOK(t, "topics", "-s", addr, "create", "rq", `{"subjects":["rq.>"]}`)
	runOK(t, "pub", "-s", addr, "rq.eu", "one")
	runOK(t, "pub", "-s", addr, "rq.us", "two")
	// Two deliveries past max_deliveries 1: both dead-lettered.
	runOK(t, "groups", "-s", addr, "create", "rq", "g", `{"max_deliveries":1,"lease_ms":1}`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		runOK(t, "poll", "-s", addr, "-n", "2", "-wait", "100", "rq", "g")
		if out := runOK(t, "topics", "-s", addr, "info", "$DLQ.rq.g"); strings.Contains(out, `"msgs": 2`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no dead letters")
		}
	}
	if out := runOK(t, "topics", "-s", addr, "requeue", "$DLQ.rq.g", `{"filter":["rq.eu"]}`); !strings.Contains(out, `"requeued": 1`) {
		t.Fatalf("requeue by filter: %s", out)
	}
	var errb bytes.Buffer
	if code := run([]string{"topics", "-s", addr, "requeue", "$DLQ.rq.g", `{"bogus":1}`}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "invalid_json") {
		t.Fatalf("requeue with an unknown field: %d %s", code, errb.String())
	}
}

// TestPubTTL: `fibril pub -ttl` sets Nats-TTL; a topic without
// allow_msg_ttl refuses it with invalid_header.
func TestPubTTL(t *testing.T) {
	addr := testserver.Addr(t)
	runOK(t, "topics", "-s", addr, "create", "ttl", `{"allow_msg_ttl":true}`)
	runOK(t, "topics", "-s", addr, "create", "plain")
	if out := runOK(t, "pub", "-s", addr, "-ttl", "1h", "ttl", "x"); !strings.Contains(out, "stored in partition") {
		t.Fatalf("pub -ttl: %s", out)
	}
	if out := runOK(t, "poll", "-s", addr, "-wait", "1000", "ttl", "g"); !strings.Contains(out, `Nats-TTL: 3600000ms`) {
		t.Fatalf("poll: %s", out)
	}
	var errb bytes.Buffer
	if code := run([]string{"pub", "-s", addr, "-ttl", "1m", "plain", "x"}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "invalid_header") {
		t.Fatalf("pub -ttl to a topic without allow_msg_ttl: %d %s", code, errb.String())
	}
	runOK(t, "topics", "-s", addr, "create", "later", `{"allow_msg_delay":true}`)
	runOK(t, "pub", "-s", addr, "-delay", "1h", "later", "held")
	if out := runOK(t, "poll", "-s", addr, "-wait", "200", "later", "g"); !strings.Contains(out, "0 message(s)") {
		t.Fatalf("poll of a held-back message: %s", out)
	}
}

// TestREADMEClusterConfigLoads: the root README's cluster node config
// (Running a cluster) loads into the cluster options and validates.
func TestREADMEClusterConfigLoads(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Running a cluster")
	_, rest, ok2 := strings.Cut(rest, "```json\n")
	block, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("no cluster config example in README.md")
	}
	cfg := filepath.Join(t.TempDir(), "n1.json")
	if err := os.WriteFile(cfg, []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	o, _, err := serveOptions([]string{"--config", cfg, "--listen", "127.0.0.1:0", "--data", t.TempDir()}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := o.Cluster
	if c == nil || c.Name != "n1" || len(c.Peers) != 2 || c.Peers[1].Name != "n3" || c.TLS.Key != "certs/n1-key.pem" {
		t.Fatalf("cluster options %+v", c)
	}
	if _, err := server.New(o); err != nil {
		t.Fatalf("the example does not validate: %v", err)
	}
}

// TestCertsWritesACAAndAKeyPerNode: fibril certs writes ca.pem and each
// node's certificate and key (the key readable by its owner only), and
// prints the flags that name them; without names it refuses.
func TestCertsWritesACAAndAKeyPerNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	out := runOK(t, "certs", "--dir", dir, "n1", "n2", "n3")
	for _, n := range []string{"n1", "n2", "n3"} {
		if !strings.Contains(out, n+": --cluster-ca "+filepath.Join(dir, "ca.pem")+" --cluster-cert "+filepath.Join(dir, n+".pem")) {
			t.Errorf("output lacks %s's flags:\n%s", n, out)
		}
		fi, err := os.Stat(filepath.Join(dir, n+"-key.pem"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s's key: %v, mode %v", n, err, fi)
		}
	}
	var stderr strings.Builder
	if code := run([]string{"certs", "--dir", dir}, io.Discard, &stderr); code != 2 {
		t.Fatalf("certs without names: exit %d, %s", code, stderr.String())
	}
}

// TestClusterTimingFlags: --cluster-tick and --cluster-election-ticks set
// raft's timing; values out of range are refused.
func TestClusterTimingFlags(t *testing.T) {
	o, _, err := serveOptions([]string{"--cluster-name", "n1", "--cluster-tick", "50ms", "--cluster-election-ticks", "20"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Cluster == nil || o.Cluster.Tick != 50*time.Millisecond || o.Cluster.ElectionTicks != 20 {
		t.Fatalf("cluster options %+v", o.Cluster)
	}
	for _, bad := range [][]string{{"--cluster-tick", "0s"}, {"--cluster-tick", "1h"}, {"--cluster-election-ticks", "1"}, {"--cluster-election-ticks", "x"}} {
		if _, _, err := serveOptions(bad, env(nil), io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
