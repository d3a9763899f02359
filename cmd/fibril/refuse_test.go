package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fibrilmq/fibril/server/broker"
)

// TestServeRefusalExitCode: a start refused because stored data is damaged
// (here an edited catalog) exits with its own code, 3, and says which file
// and what to run; other failures keep exit code 1.
func TestServeRefusalExitCode(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Open(dir, broker.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic("orders", broker.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	cat := filepath.Join(dir, "catalog.json")
	raw, err := os.ReadFile(cat)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cat, bytes.Replace(raw, []byte(`"id": 1`), []byte(`"it": 1`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	code := run([]string{"serve", "--listen", "127.0.0.1:0", "--data", dir}, &bytes.Buffer{}, &errb)
	if code != exitRefused || !strings.Contains(errb.String(), cat) || !strings.Contains(errb.String(), "fibril verify --data "+dir) {
		t.Fatalf("serve on an edited catalog: exit %d: %s", code, errb.String())
	}
}
