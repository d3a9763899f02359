package server

// Regression tests for what stock NATS clients expect of a NATS server
// (SPEC.md 16): no-responders statuses, empty header blocks, TLS
// advertising and TLS-first, and JetStream calls answered at once.

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsRequestTimeout is far longer than any answer may take: a test that
// waits it out has failed.
const natsRequestTimeout = 5 * time.Second

// TestNoRespondersStatusToStockClient: a request nobody serves gets the 503
// status (nats.ErrNoResponders) instead of the client's timeout, with and
// without the durable engine; a served subject still answers.
func TestNoRespondersStatusToStockClient(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
	}{{"core", nil}, {"durable", durableFiles}} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, tc.mutate)
			nc := natsConnect(t, s)
			start := time.Now()
			_, err := nc.Request("nobody.home", []byte("hi"), natsRequestTimeout)
			if !errors.Is(err, nats.ErrNoResponders) {
				t.Fatalf("request to nobody: %v after %s, want ErrNoResponders", err, time.Since(start))
			}
			// The old-style request (a plain inbox subscription per call).
			oldStyle := natsConnect(t, s, nats.UseOldRequestStyle())
			if _, err := oldStyle.Request("nobody.home", nil, natsRequestTimeout); !errors.Is(err, nats.ErrNoResponders) {
				t.Fatalf("old-style request: %v, want ErrNoResponders", err)
			}
			if _, err := nc.Subscribe("svc.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			if r, err := nc.Request("svc.echo", []byte("x"), natsRequestTimeout); err != nil || string(r.Data) != "x" {
				t.Fatalf("served request: %v %v", r, err)
			}
		})
	}
}

// TestNoRespondersOnlyWhenAsked: a connection that did not ask for
// no_responders gets no status frame (nats-server sends none either).
func TestNoRespondersOnlyWhenAsked(t *testing.T) {
	s := startServer(t, nil)
	w := dialInfo(t, s)
	w.send(`CONNECT {"headers":true}` + "\r\nSUB _INBOX.x.* 1\r\nPUB nobody _INBOX.x.1 2\r\nhi\r\nPING\r\n")
	w.expect(`^PONG$`)
	w2 := dialInfo(t, s)
	w2.send(`CONNECT {"headers":true,"no_responders":true}` + "\r\nSUB _INBOX.x.* 1\r\nPUB nobody _INBOX.x.1 2\r\nhi\r\nPING\r\n")
	w2.expect(`^HMSG _INBOX.x.1 1 38 38$`)
	w2.expectBody("NATS/1.0 503\r\nNats-Subject: nobody\r\n\r\n")
	w2.expect(`^PONG$`)
}

// TestEmptyHeaderBlockDelivered: `HPUB s 0 4` (nats.js with an empty
// header set) is a message without headers, delivered as MSG, as
// nats-server delivers it (it used to be refused invalid_header).
func TestEmptyHeaderBlockDelivered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
	}{{"core", nil}, {"durable", durableFiles}} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, tc.mutate)
			sub := dialInfo(t, s)
			sub.send(`CONNECT {"headers":true}` + "\r\nSUB s 1\r\nPING\r\n")
			sub.expect(`^PONG$`)
			pub := dialInfo(t, s)
			pub.send(`CONNECT {"headers":true}` + "\r\nHPUB s 0 4\r\nabcd\r\nPING\r\n")
			pub.expect(`^PONG$`)
			sub.expect(`^MSG s 1 4$`)
			sub.expectBody("abcd")
		})
	}
}

// TestTLSAdvertisedOnlyWhereServed: the plain listener cannot upgrade to
// TLS, so its INFO must not say tls_available (nats.js then tried TLS on
// every default connection and failed); the TLS listener says
// tls_required.
func TestTLSAdvertisedOnlyWhereServed(t *testing.T) {
	cfg, _ := selfSigned(t)
	s := startServer(t, func(o *Options) { o.TLSListen = "127.0.0.1:0"; o.TLSConfig = cfg })
	w := dial(t, s.Addr().String())
	info := w.expect(`^INFO \{.*\}$`)
	if strings.Contains(info, "tls_available") || strings.Contains(info, "tls_required") {
		t.Fatalf("plain listener advertises TLS: %s", info)
	}
	tw := dial(t, s.TLSAddr().String())
	if info := tw.expect(`^INFO \{.*\}$`); !strings.Contains(info, `"tls_required":true`) {
		t.Fatalf("TLS listener INFO: %s", info)
	}
}

// TestTLSHandshakeFirstWithStockClient: with TLSHandshakeFirst the TLS
// listener serves clients that start the handshake before INFO (nats.go
// TLSHandshakeFirst, `nats --tlsfirst`) and still those that wait for INFO.
func TestTLSHandshakeFirstWithStockClient(t *testing.T) {
	cfg, pool := selfSigned(t)
	s := startServer(t, func(o *Options) {
		o.TLSListen = "127.0.0.1:0"
		o.TLSConfig = cfg
		o.TLSHandshakeFirst = true
	})
	url := "tls://" + s.TLSAddr().String()
	clientTLS := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	first, err := nats.Connect(url, nats.Secure(clientTLS), nats.TLSHandshakeFirst(), nats.NoReconnect(), nats.Timeout(natsRequestTimeout))
	if err != nil {
		t.Fatalf("TLS-first connect: %v", err)
	}
	defer first.Close()
	classic, err := nats.Connect(url, nats.Secure(clientTLS), nats.NoReconnect(), nats.Timeout(natsRequestTimeout))
	if err != nil {
		t.Fatalf("classic TLS connect: %v", err)
	}
	defer classic.Close()
	if _, err := first.Subscribe("svc", func(m *nats.Msg) { _ = m.Respond([]byte("pong")) }); err != nil {
		t.Fatal(err)
	}
	if err := first.Flush(); err != nil {
		t.Fatal(err)
	}
	if r, err := classic.Request("svc", nil, natsRequestTimeout); err != nil || string(r.Data) != "pong" {
		t.Fatalf("request between TLS-first and classic: %v %v", r, err)
	}
}

// TestJetStreamCallsAnsweredAtOnce: `$JS.API.*` requests are answered at
// once (they used to get a permissions violation and time out); a topic
// created with TOPIC CREATE is a stream; a JetStream publish to a subject no topic captures fails at once with "no
// stream", and one to a topic's subject gets a publish ack naming the
// topic, so a client neither waits nor publishes twice.
func TestJetStreamCallsAnsweredAtOnce(t *testing.T) {
	s := startServer(t, durableFiles)
	w := fibrilConn(t, s, "")
	w.send("TOPIC CREATE orders {\"subjects\":[\"orders.>\"]}\r\n")
	w.expect(`^\+OK \{`)
	nc := natsConnect(t, s)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), natsRequestTimeout)
	defer cancel()
	if ai, err := js.AccountInfo(ctx); err != nil || ai.Streams != 1 {
		t.Fatalf("AccountInfo: %+v %v", ai, err)
	}
	if _, err := js.Stream(ctx, "orders"); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if _, err := js.Stream(ctx, "nosuch"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("Stream nosuch: %v", err)
	}
	if _, err := js.Publish(ctx, "plain.subject", []byte("x")); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("Publish to an uncaptured subject: %v, want ErrNoStreamResponse", err)
	}
	for i := 1; i <= 2; i++ {
		ack, err := js.Publish(ctx, "orders.new", []byte("x"))
		if err != nil || ack.Stream != "orders" || ack.Sequence != uint64(i) {
			t.Fatalf("Publish to a topic's subject: %+v %v", ack, err)
		}
	}
	w.send("TOPIC INFO orders\r\n")
	if l := w.expect(`^\+OK \{`); !strings.Contains(l, `"msgs":2,`) {
		t.Fatalf("the topic holds other than 2 messages: %s", l)
	}
}

// TestDollarSubjectsFollowPublishPermissions: a "$" subject published from
// NATS mode is a plain subject, but still under the user's publish rule.
func TestDollarSubjectsFollowPublishPermissions(t *testing.T) {
	pw := hash(t, "pw")
	s := startServer(t, func(o *Options) {
		o.Users = []User{{Name: "u", PasswordHash: pw, Permissions: Permissions{
			Publish: SubjectPermission{Deny: []string{"$JS.>"}}}}}
	})
	w := dialInfo(t, s)
	w.send(`CONNECT {"user":"u","pass":"pw","headers":true,"no_responders":true}` + "\r\nSUB _INBOX.r 1\r\nPUB $JS.EVENT.x _INBOX.r 0\r\n\r\nPUB $SYS.x _INBOX.r 0\r\n\r\nPING\r\n")
	w.expect(`^-ERR 'Permissions Violation for Publish to "\$JS.EVENT.x"'$`)
	w.expect(`^HMSG _INBOX.r 1 38 38$`)
	w.expectBody("NATS/1.0 503\r\nNats-Subject: $SYS.x\r\n\r\n")
	w.expect(`^PONG$`)
}
