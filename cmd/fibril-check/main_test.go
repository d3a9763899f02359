package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFibrilCheckExitCodes(t *testing.T) {
	dir := t.TempDir()
	good := `{"op":"phase","proc":-1,"value":"start","seed":42,"dead_letter":"dlq","outcome":"ok"}
{"op":"publish","proc":1,"topic":"t","value":"a","pos":"0:1","outcome":"ok","invoke":1,"complete":2}
{"op":"deliver","proc":2,"topic":"t","group":"g","value":"a","pos":"0:1","handle":"h","attempt":1,"lease_ms":1000,"outcome":"ok","invoke":3,"complete":4}
{"op":"ack","proc":2,"topic":"t","group":"g","value":"a","handle":"h","outcome":"ok","invoke":5,"complete":6}
{"op":"phase","proc":-1,"value":"done","outcome":"ok"}
`
	// The same run with the delivery and its ack gone: a confirmed value lost.
	lines := strings.Split(good, "\n")
	bad := strings.Join(append(append([]string{}, lines[:2]...), lines[4:]...), "\n")
	for _, tc := range []struct {
		name, body string
		code       int
		want       string
	}{
		{"valid", good, 0, "valid"},
		{"lost", bad, 1, "INVALID"},
		{"malformed", "nope\n", 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".jsonl")
			if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			if code := run([]string{path}, &out, &errb); code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tc.want) || (tc.code < 2 && !strings.Contains(out.String(), "seed 42")) {
				t.Fatalf("output lacks %q or the seed:\n%s", tc.want, out.String())
			}
		})
	}
	if code := run(nil, &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
		t.Fatalf("no args: exit %d", code)
	}
}
