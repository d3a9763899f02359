package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestServeOptionsPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "fibril.json")
	if err := os.WriteFile(cfg, []byte(`{"max_payload": 2000, "listen": "127.0.0.1:5000", "ping_interval": "3s",
		"auto_create": false, "users": [{"name": "u", "password_bcrypt": "$2a$04$abcdefghijklmnopqrstuu5Xo0Hj0J3e5nTBL2Qy4yGm1bXc5Tgi"}]}`), 0o600); err != nil {
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
	if !sc.readyJSON || sc.logLevel != slog.LevelDebug || o.AutoCreateTopics || o.PingInterval != 3*time.Second || len(o.Users) != 1 {
		t.Fatalf("got %+v %+v", sc, o)
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
	if code := run([]string{"nope"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("unknown command exit code %d, want 2", code)
	}
}

// startServer runs a durable server in-process on 127.0.0.1:0.
func startServer(t *testing.T) string {
	t.Helper()
	o := server.DefaultOptions()
	o.Listen = "127.0.0.1:0"
	o.DataDir = t.TempDir()
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-s.Ready():
	case err := <-done:
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done })
	return s.Addr().String()
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
	addr := startServer(t)
	if out := runOK(t, "topics", "-s", addr, "create", "jobs", `{"partitions":2}`); !strings.Contains(out, `"name": "jobs"`) {
		t.Fatalf("create: %s", out)
	}
	if out := runOK(t, "pub", "-s", addr, "jobs", "first"); !strings.Contains(out, "stored in partition") {
		t.Fatalf("pub: %s", out)
	}
	if out := runOK(t, "pub", "-s", addr, "_INBOX.x", "plain"); !strings.Contains(out, "no durable topic") {
		t.Fatalf("plain pub: %s", out)
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
}
