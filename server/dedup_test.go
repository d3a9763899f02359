package server

import (
	"fmt"
	"strings"
	"testing"
)

// hpubID is an HPUB of body to subject (reply-to reply when not empty)
// with header Nats-Msg-Id id.
func hpubID(subject, reply, id, body string) string {
	hdr := "NATS/1.0\r\nNats-Msg-Id: " + id + "\r\n\r\n"
	if reply != "" {
		subject += " " + reply
	}
	return fmt.Sprintf("HPUB %s %d %d\r\n%s%s\r\n", subject, len(hdr), len(hdr)+len(body), hdr, body)
}

// TestPublishDuplicateConfirm: over the wire a publish repeating a
// Nats-Msg-Id within the topic's window is confirmed "+OK <p>:<seq>
// duplicate" with the first one's position and not stored; an id over
// 256 bytes is invalid_header; a NATS-mode request gets JetStream's
// PubAck with "duplicate":true.
func TestPublishDuplicateConfirm(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	w.send("TOPIC CREATE orders\r\n")
	w.expect(`^\+OK \{.*"duplicate_window_ms":120000,"duplicate_max_ids":100000\}`)
	w.send(hpubID("orders", "", "order-7", "one") + hpubID("orders", "", "order-8", "two") + hpubID("orders", "", "order-7", "one, retried"))
	w.expect(`^\+OK 0:1$`)
	w.expect(`^\+OK 0:2$`)
	w.expect(`^\+OK 0:1 duplicate$`)
	w.send(hpubID("orders", "", strings.Repeat("x", 257), "long"))
	w.expect(`^-ERR 'invalid_header .*Nats-Msg-Id of 257 bytes`)
	w.send("TOPIC INFO orders\r\n")
	w.expect(`^\+OK \{.*"msgs":2,`)

	n := dialInfo(t, s)
	n.send("CONNECT {\"headers\":true}\r\nSUB _INBOX.r 1\r\n" + hpubID("orders", "_INBOX.r", "order-8", "two again") + hpubID("orders", "_INBOX.r", "order-9", "three"))
	n.expect(`^MSG _INBOX\.r 1 \d+$`)
	n.expectBody(`{"stream":"orders","seq":2,"duplicate":true}`)
	n.expect(`^MSG _INBOX\.r 1 \d+$`)
	n.expectBody(`{"stream":"orders","seq":3}`)
}
