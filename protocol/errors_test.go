package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestErrorTableInSync checks errors_gen.go against errors.json, so an edit
// of the table without `go generate` fails.
func TestErrorTableInSync(t *testing.T) {
	raw, err := os.ReadFile("errors.json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Code        string `json:"code"`
		Text        string `json:"text"`
		NATSText    string `json:"nats_text"`
		Fatal       bool   `json:"fatal"`
		NATSFatal   bool   `json:"nats_fatal"`
		Retriable   bool   `json:"retriable"`
		Description string `json:"description"`
	}
	if err := json.Unmarshal(raw, &rows); err != nil {
		t.Fatal(err)
	}
	codes := Codes()
	if len(codes) != len(rows) {
		t.Fatalf("errors_gen.go has %d codes, errors.json %d: run go generate", len(codes), len(rows))
	}
	for i, r := range rows {
		s := Code(r.Code).Spec()
		if codes[i] != Code(r.Code) || s.Text != r.Text || s.NATSText != r.NATSText || s.Fatal != r.Fatal ||
			s.NATSFatal != r.NATSFatal || s.Retriable != r.Retriable || s.Description != r.Description {
			t.Errorf("row %d (%s) differs from errors_gen.go: run go generate", i, r.Code)
		}
	}
}

// TestSpecErrorTable checks that SPEC.md's error table lists every code with
// the same columns as errors.json.
func TestSpecErrorTable(t *testing.T) {
	raw, err := os.ReadFile("../SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	yn := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	for _, c := range Codes() {
		s := c.Spec()
		nt := s.NATSText
		if nt == "" {
			nt = "—"
		}
		row := fmt.Sprintf("| `%s` | %s | %s | %s | %s | %s |", c, s.Text, nt, yn(s.Fatal), yn(s.NATSFatal), yn(s.Retriable))
		if !bytes.Contains(raw, []byte(row)) {
			t.Errorf("SPEC.md lacks the row\n%s", row)
		}
	}
}

func TestErrorValue(t *testing.T) {
	cause := errors.New("disk")
	e := &Error{Code: CodeInternal, Detail: "append", Err: cause}
	if e.Error() != "fibril: internal: internal server error: append: disk" {
		t.Fatalf("Error() = %q", e.Error())
	}
	if !errors.Is(e, cause) || !errors.Is(e, ErrInternal) || errors.Is(e, ErrQueueFull) {
		t.Fatal("errors.Is")
	}
	if e.Fatal() || !e.Retriable() || e.NATSFatal() {
		t.Fatal("Fatal/Retriable")
	}
	if !ErrMaxPayload.Fatal() || !ErrUnknownOp.NATSFatal() || ErrUnknownOp.Fatal() {
		t.Fatal("fatality columns")
	}
	wrapped := fmt.Errorf("conn 7: %w", &Error{Code: CodeStaleHandle})
	var pe *Error
	if !errors.As(wrapped, &pe) || pe.Code != CodeStaleHandle {
		t.Fatal("errors.As through wrapping")
	}
	if got := (&Error{Code: CodeInvalidSubject, Detail: "it's\nbad"}).Text(); got != "invalid_subject subject is not valid: it\"s bad" {
		t.Fatalf("Text() = %q", got)
	}
	unknown := Code("from_the_future")
	if unknown.Known() || unknown.Spec().Text != "from_the_future" || (&Error{Code: unknown}).Fatal() {
		t.Fatal("unknown code")
	}
}

// TestParseErrTextRoundTrip sends every code in both forms and reads it back.
func TestParseErrTextRoundTrip(t *testing.T) {
	for _, c := range Codes() {
		e := &Error{Code: c, Detail: "ctx"}
		if got := ParseErrText([]byte(e.Text())); got.Code != c || got.Detail != "ctx" {
			t.Errorf("fibril form of %s read back as %s %q", c, got.Code, got.Detail)
		}
		if s := c.Spec(); s.NATSText != "" {
			got := ParseErrText([]byte(e.NATSText()))
			if got.Code.Spec().NATSText != s.NATSText {
				t.Errorf("NATS form %q of %s read back as %s", e.NATSText(), c, got.Code)
			}
		}
	}
	if got := ParseErrText([]byte("  'Stale Connection'")); got.Code != CodeStaleConnection {
		t.Errorf("quoted NATS text: %s", got.Code)
	}
	if got := ParseErrText([]byte("new_code something new")); got.Code != "new_code" || got.Detail != "something new" {
		t.Errorf("unknown fibril code: %+v", got)
	}
	if got := ParseErrText([]byte("Something Else")); got.Code != "unknown" || !strings.Contains(got.Detail, "Something") {
		t.Errorf("free text: %+v", got)
	}
}
