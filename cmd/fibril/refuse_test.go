package main

import (
	"bytes"
	"context"
	"fmt"
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

// TestVerifyAndRepairCommands: fibril verify on a directory with a damaged
// message exits 12 naming the file, changing nothing; fibril repair brings
// it back and lists what each group lost; verify then exits 0. A missing
// catalog exits 13 and repair rebuilds it from the topics' topic.json.
func TestVerifyAndRepairCommands(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Open(dir, broker.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	tp, err := b.CreateTopic("orders", broker.TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Group("billing", broker.GroupConfig{DeadLetter: "-"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 20 {
		if _, err := tp.Publish(ctx, broker.Message{Subject: "orders", Data: []byte(fmt.Sprint("message ", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "topics", "1", "0", "data", "00000000000000000001.seg")
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, 32+32+2); err != nil { // inside record 1
		t.Fatal(err)
	}
	f.Close()

	var out, errb bytes.Buffer
	if code := run([]string{"verify", "--data", dir}, &out, &errb); code != 12 || !strings.Contains(out.String(), seg) {
		t.Fatalf("verify: exit %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"repair", "--data", dir}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "lost: topic orders group billing partition 0: offsets 1..1") {
		t.Fatalf("repair: exit %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"verify", "--data", dir}, &out, &errb); code != 0 {
		t.Fatalf("verify after the repair: exit %d\n%s%s", code, out.String(), errb.String())
	}

	if err := os.Remove(filepath.Join(dir, "catalog.json")); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"verify", "--data", dir}, &out, &errb); code != 13 {
		t.Fatalf("verify without a catalog: exit %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"repair", "--data", dir}, &out, &errb); code != 0 || !strings.Contains(out.String(), "took back topic orders") {
		t.Fatalf("repair without a catalog: exit %d\n%s%s", code, out.String(), errb.String())
	}
	b, err = broker.Open(dir, broker.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tp, ok := b.Topic("orders")
	if !ok {
		t.Fatal("topic lost")
	}
	g, _ := tp.FindGroup("billing")
	if g == nil {
		t.Fatal("group lost")
	}
	if in := g.Info(); in.Pending != 19 {
		t.Fatalf("after rebuilding the catalog the group has %d pending, want 19", in.Pending)
	}
}
