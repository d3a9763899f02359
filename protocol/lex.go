package protocol

import "github.com/fibrilmq/fibril/wire"

// Small hand-written helpers for the hot path: no strconv, no string(b), no
// bytes.Split (SPEC.md, "Grammar").

const (
	maxUint64 = ^uint64(0)
	maxInt64  = uint64(1<<63 - 1)
	maxUint32 = uint64(1<<32 - 1)
	// MaxCount is the largest count argument (UNSUB max-msgs, SUB
	// max-inflight, POLL max).
	MaxCount = 1<<31 - 1
	// MaxMillis is the largest millisecond argument (POLL wait-ms, NACK
	// delay-ms, EXTEND ms), about 49.7 days.
	MaxMillis = 1<<32 - 1
	// MaxGroupName is the longest durable group name.
	MaxGroupName = 255
)

type numStatus uint8

const (
	numOK numStatus = iota
	numInvalid
	numOverflow
)

// parseUint parses a non-empty run of ASCII digits no larger than max.
func parseUint(b []byte, max uint64) (uint64, numStatus) {
	if len(b) == 0 {
		return 0, numInvalid
	}
	var v uint64
	over := false
	for _, c := range b {
		d := uint64(c) - '0'
		if d > 9 {
			return 0, numInvalid
		}
		if !over {
			if v > (maxUint64-d)/10 {
				over = true
				continue
			}
			v = v*10 + d
		}
	}
	if over || v > max {
		return 0, numOverflow
	}
	return v, numOK
}

const hexDigits = "0123456789abcdef"

// appendHex8 appends v as exactly 8 lowercase hex digits.
func appendHex8(dst []byte, v uint32) []byte {
	return append(dst,
		hexDigits[v>>28&0xf], hexDigits[v>>24&0xf], hexDigits[v>>20&0xf], hexDigits[v>>16&0xf],
		hexDigits[v>>12&0xf], hexDigits[v>>8&0xf], hexDigits[v>>4&0xf], hexDigits[v&0xf])
}

// parseHex8 parses exactly 8 lowercase hex digits.
func parseHex8(b []byte) (uint32, bool) {
	if len(b) != 8 {
		return 0, false
	}
	var v uint32
	for _, c := range b {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		default:
			return 0, false
		}
		v = v<<4 | uint32(d)
	}
	return v, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

// eqFold reports whether tok equals the upper-case ASCII word w, ignoring
// the case of letters in tok.
func eqFold(tok []byte, w string) bool {
	if len(tok) != len(w) {
		return false
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != w[i] {
			return false
		}
	}
	return true
}

// nextToken returns the first token of b and the rest after it (leading
// spaces of the rest not removed). tok is empty when b holds only spaces.
func nextToken(b []byte) (tok, rest []byte) {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	j := i
	for j < len(b) && !isSpace(b[j]) {
		j++
	}
	return b[i:j], b[j:]
}

// CheckSubject reports whether subject is valid (SPEC.md, "Subjects"; the
// rule is wire.CheckSubject): non-empty tokens separated by '.', no byte
// below 0x21 or 0x7f, bytes above 0x7f only as valid UTF-8, '*' and '>' only
// as whole tokens and '>' only last. With wildcards false, a '*' or '>'
// token gives CodeWildcardNotAllowed. It returns nil or an *Error with
// CodeInvalidSubject or CodeWildcardNotAllowed.
func CheckSubject(subject []byte, wildcards bool) error {
	if c := checkSubject(subject, wildcards); c != "" {
		return &Error{Code: c, Detail: quoteDetail(subject)}
	}
	return nil
}

// checkSubject maps the fault wire.CheckSubject finds to its error code.
func checkSubject(s []byte, wildcards bool) Code {
	switch wire.CheckSubject(s, wildcards) {
	case wire.NoFault:
		return ""
	case wire.Wildcard:
		return CodeWildcardNotAllowed
	}
	return CodeInvalidSubject
}

// CheckGroupName reports whether name is a valid durable group name: 1 to 255
// bytes from A-Z a-z 0-9 _ -. It returns nil or an *Error with
// CodeInvalidName.
func CheckGroupName(name []byte) error {
	if !validGroupName(name) {
		return &Error{Code: CodeInvalidName, Detail: quoteDetail(name)}
	}
	return nil
}

func validGroupName(b []byte) bool {
	if len(b) == 0 || len(b) > MaxGroupName {
		return false
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validToken reports whether b is a non-empty run of bytes above 0x20 (not
// 0x7f): a sid or a plain queue group.
func validToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// quoteDetail renders bytes for an error Detail: at most 64 bytes, quoted,
// with non-printable bytes escaped. Error path only.
func quoteDetail(b []byte) string {
	const max = 64
	out := make([]byte, 0, len(b)+8)
	out = append(out, '"')
	for i, c := range b {
		if i == max {
			out = append(out, "..."...)
			break
		}
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\'' || c == '\\' {
			out = append(out, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
			continue
		}
		out = append(out, c)
	}
	return string(append(out, '"'))
}
