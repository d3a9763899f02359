package server

import (
	"fmt"
	"testing"
)

// hpubHdr is an HPUB of body to subject with one header field.
func hpubHdr(subject, key, value, body string) string {
	hdr := fmt.Sprintf("NATS/1.0\r\n%s: %s\r\n\r\n", key, value)
	return fmt.Sprintf("HPUB %s %d %d\r\n%s%s\r\n", subject, len(hdr), len(hdr)+len(body), hdr, body)
}

// TestFibrilPublishExpectedHeadersNotStoredUnchecked (regression: a
// Fibril-mode publish with Nats-Expected-* headers was stored without its
// condition being checked): each of the four is checked and a failed one
// is answered -ERR expected_mismatch naming the actual value; a field of
// the family Fibril does not check is invalid_header; nothing refused is
// stored (conformance 096 and the broker's tests cover a restart).
func TestFibrilPublishExpectedHeadersNotStoredUnchecked(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	w.send("TOPIC CREATE kv {\"subjects\":[\"kv.>\"]}\r\n")
	w.expect(`^\+OK \{`)
	for _, c := range []struct{ subject, key, value, want string }{
		{"kv.a", "Nats-Expected-Last-Sequence", "3", `^-ERR 'expected_mismatch .*wrong last sequence: 0'$`},
		{"kv.a", "Nats-Expected-Last-Sequence", "0", `^\+OK 0:1$`},
		{"kv.b", "Nats-Expected-Last-Subject-Sequence", "0", `^\+OK 0:2$`},
		{"kv.a", "Nats-Expected-Last-Subject-Sequence", "0", `^-ERR 'expected_mismatch .*wrong last sequence: 1'$`},
		{"kv.a", "Nats-Expected-Last-Subject-Sequence", "1", `^\+OK 0:3$`},
		{"kv.a", "Nats-Expected-Stream", "other", `^-ERR 'expected_mismatch .*expected stream does not match`},
		{"kv.a", "Nats-Expected-Last-Msg-Id", "nope", `^-ERR 'expected_mismatch .*wrong last msg ID: '$`},
		{"kv.a", "Nats-Expected-Last-Sequence", "x1", `^-ERR 'invalid_header .*Nats-Expected-Last-Sequence'$`},
		{"kv.a", "Nats-Expected-Last-Subject-Sequence-Subject", "kv.b", `^-ERR 'invalid_header .*Nats-Expected-Last-Subject-Sequence-Subject'$`},
	} {
		w.send(hpubHdr(c.subject, c.key, c.value, "v"))
		w.expect(c.want)
	}
	w.send("TOPIC INFO kv\r\n")
	w.expect(`^\+OK \{.*"msgs":3,`)
}
