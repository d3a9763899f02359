package protocol

import (
	"bytes"
	"strings"
)

//go:generate go run ./internal/errgen -in errors.json -out errors_gen.go

// Code is a stable snake_case error code from errors.json (SPEC.md, "Errors").
// Clients switch on the code, never on the human text.
type Code string

// ErrorSpec is one row of the error table.
type ErrorSpec struct {
	Code Code
	// Text is the human text a Fibril client gets after the code.
	Text string
	// NATSText is the text a client that did not send "fibril":1 gets; empty
	// when NATS has no such error (such clients then get the Fibril form).
	NATSText string
	// Fatal says the server closes the connection after sending the error to
	// a Fibril client; NATSFatal says the same for other clients.
	Fatal, NATSFatal bool
	// Retriable says sending the same command again later may succeed.
	Retriable bool
	// Description explains when the error happens.
	Description string
}

// Spec returns the table row of c. An unknown code (from a newer server) gets
// a row with Text equal to the code, not fatal, not retriable.
func (c Code) Spec() ErrorSpec {
	if s, ok := lookupSpec(c); ok {
		return s
	}
	return ErrorSpec{Code: c, Text: string(c)}
}

// Known reports whether c is in the error table.
func (c Code) Known() bool {
	_, ok := lookupSpec(c)
	return ok
}

// Error is a protocol error: a parse error returned by Parser.Parse, or an
// -ERR received from the peer (see ParseErrText). The zero Detail and Err are
// fine. Use errors.Is(err, ErrCRCMismatch) or errors.As to get the Code.
type Error struct {
	// Code is the table code.
	Code Code
	// Detail is optional context for people (the offending subject, the
	// limit). It never contains quotes or line ends once encoded.
	Detail string
	// Err is an optional wrapped cause.
	Err error
}

// NewError returns an *Error with the given code and detail.
func NewError(code Code, detail string) *Error { return &Error{Code: code, Detail: detail} }

// Error returns "fibril: <code>: <text>[: <detail>][: <cause>]".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("fibril: ")
	b.WriteString(string(e.Code))
	b.WriteString(": ")
	b.WriteString(e.Code.Spec().Text)
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the wrapped cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same Code, so that
// errors.Is(err, ErrCRCMismatch) works for any detail.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Fatal reports whether the server closes a Fibril connection after this error.
func (e *Error) Fatal() bool { return e.Code.Spec().Fatal }

// NATSFatal reports whether the server closes a non-Fibril connection after
// this error.
func (e *Error) NATSFatal() bool { return e.Code.Spec().NATSFatal }

// Retriable reports whether sending the same command again may succeed.
func (e *Error) Retriable() bool { return e.Code.Spec().Retriable }

// Text returns the text of the -ERR line a Fibril client gets (without the
// quotes): "<code> <text>[: <detail>]".
func (e *Error) Text() string {
	s := string(e.Code) + " " + e.Code.Spec().Text
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return sanitize(s)
}

// NATSText returns the text of the -ERR line a non-Fibril client gets: the
// NATS text (plus " "+Detail for permission errors, as NATS does), or Text()
// when NATS has no such error.
func (e *Error) NATSText() string {
	spec := e.Code.Spec()
	if spec.NATSText == "" {
		return e.Text()
	}
	if e.Detail != "" && (e.Code == CodePermissionDenied || e.Code == CodeReservedSubject) {
		return sanitize(spec.NATSText + " " + e.Detail)
	}
	return spec.NATSText
}

// sanitize replaces the bytes that would break an -ERR line.
func sanitize(s string) string {
	if !strings.ContainsAny(s, "'\r\n") {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '\'':
			return '"'
		case '\r', '\n':
			return ' '
		}
		return r
	}, s)
}

// ParseErrText turns the text of a received -ERR line (Command.Text; one
// pair of surrounding quotes is removed if still there) into an *Error. A Fibril text "<code> <text>[: <detail>]"
// with a known code gives that code; a NATS text gives the code whose
// NATSText it starts with (first in table order); anything else gives a code
// equal to the first word when it looks like a code, with the rest as Detail.
// It never returns nil.
func ParseErrText(text []byte) *Error {
	t := string(bytes.TrimSpace(text))
	if len(t) >= 2 && t[0] == '\'' && t[len(t)-1] == '\'' {
		t = t[1 : len(t)-1]
	}
	word, rest, _ := strings.Cut(t, " ")
	if c := Code(word); c.Known() {
		return &Error{Code: c, Detail: detailOf(rest, c.Spec().Text)}
	}
	low := strings.ToLower(t)
	for _, c := range Codes() {
		nt := strings.ToLower(c.Spec().NATSText)
		if nt != "" && strings.HasPrefix(low, nt) {
			return &Error{Code: c, Detail: strings.TrimSpace(t[len(nt):])}
		}
	}
	if isCodeWord(word) {
		return &Error{Code: Code(word), Detail: rest}
	}
	return &Error{Code: Code("unknown"), Detail: t}
}

// detailOf strips the table text from the rest of a Fibril -ERR text.
func detailOf(rest, text string) string {
	rest = strings.TrimPrefix(rest, text)
	rest = strings.TrimPrefix(rest, ":")
	return strings.TrimSpace(rest)
}

func isCodeWord(w string) bool {
	if w == "" {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
