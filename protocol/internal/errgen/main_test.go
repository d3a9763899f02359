package main

import (
	"os"
	"strings"
	"testing"
)

func TestGoName(t *testing.T) {
	for in, want := range map[string]string{
		"crc_mismatch": "CRCMismatch", "invalid_json": "InvalidJSON", "unknown_op": "UnknownOp",
		"duplicate_sid": "DuplicateSID", "max_payload": "MaxPayload",
	} {
		if got := goName(in); got != want {
			t.Errorf("goName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGenerateRefusesBadTables(t *testing.T) {
	row := `{"code":"a_b","text":"t","nats_text":"","fatal":false,"nats_fatal":false,"retriable":false,"description":"d"}`
	tests := map[string]string{
		"duplicate":   "[" + row + "," + row + "]",
		"not snake":   `[{"code":"A-b","text":"t","description":"d"}]`,
		"quote":       `[{"code":"a","text":"it's","description":"d"}]`,
		"no text":     `[{"code":"a","description":"d"}]`,
		"unknown key": `[{"code":"a","text":"t","description":"d","extra":1}]`,
		"not json":    `{`,
	}
	for name, src := range tests {
		if _, err := generate([]byte(src)); err == nil {
			t.Errorf("%s: generate accepted %s", name, src)
		}
	}
	out, err := generate([]byte("[" + row + "]"))
	if err != nil || !strings.Contains(string(out), `CodeAB Code = "a_b"`) || !strings.Contains(string(out), "DO NOT EDIT") {
		t.Fatalf("generate = %s, %v", out, err)
	}
}

// TestCheckedInOutput regenerates from the real table and compares with the
// checked-in file.
func TestCheckedInOutput(t *testing.T) {
	src, err := os.ReadFile("../../errors.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../errors_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	got, err := generate(src)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatal("errors_gen.go is stale: run go generate ./protocol/")
	}
}
