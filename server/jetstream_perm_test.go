package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestJetStreamAPIObeysPermissions (SPEC.md 16.2, 6.1): creating a stream
// needs TOPIC CREATE's rights, consumers and pulls need consume rights,
// and a user who may not see a stream is refused at once.
func TestJetStreamAPIObeysPermissions(t *testing.T) {
	pw := hash(t, "pw")
	s := startServer(t, func(o *Options) {
		durableFiles(o)
		o.Users = []User{
			{Name: "admin", PasswordHash: pw},
			{Name: "worker", PasswordHash: pw, Permissions: Permissions{
				Publish: SubjectPermission{Allow: []string{"_INBOX.>"}},
				Consume: SubjectPermission{Allow: []string{"work.>", "WORK", "_INBOX.>"}}}},
			{Name: "other", PasswordHash: pw, Permissions: Permissions{
				Publish: SubjectPermission{Allow: []string{"other.>", "_INBOX.>"}},
				Consume: SubjectPermission{Allow: []string{"other.>", "_INBOX.>"}}}},
		}
	})
	js := func(user string) jetstream.JetStream {
		j, err := jetstream.New(natsConnect(t, s, nats.UserInfo(user, "pw")))
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := jetstream.StreamConfig{Name: "WORK", Subjects: []string{"work.>"}}
	start := time.Now()
	if _, err := js("worker").CreateStream(ctx, cfg); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("worker created a stream: %v", err)
	}
	admin := js("admin")
	st, err := admin.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Publish(ctx, "work.1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	w := js("worker")
	c, err := w.CreateOrUpdateConsumer(ctx, "WORK", jetstream.ConsumerConfig{Durable: "w"})
	if err != nil {
		t.Fatalf("worker consumer: %v", err)
	}
	b, err := c.Fetch(1, jetstream.FetchMaxWait(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range b.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatalf("worker ack: %v", err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("worker fetched %d", n)
	}
	if err := w.DeleteStream(ctx, "WORK"); err == nil {
		t.Fatal("worker deleted the stream")
	}
	o := js("other")
	if _, err := o.Stream(ctx, "WORK"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("other sees WORK: %v", err)
	}
	if _, err := o.CreateOrUpdateConsumer(ctx, "WORK", jetstream.ConsumerConfig{Durable: "x"}); err == nil {
		t.Fatal("other made a consumer of WORK")
	}
	names := 0
	for range o.StreamNames(ctx).Name() {
		names++
	}
	if names != 0 {
		t.Fatalf("other lists %d streams", names)
	}
	if time.Since(start) > 8*time.Second {
		t.Fatalf("refusals took %v: answered at once?", time.Since(start))
	}
	_ = st
}

// TestJetStreamExpectedHeadersRefused: a publish with a Nats-Expected-*
// header Fibril does not check is refused, not stored unchecked, and one
// whose expectation does not hold is not stored (SPEC.md 16.2).
func TestJetStreamExpectedHeadersRefused(t *testing.T) {
	s := startServer(t, durableFiles)
	js, err := jetstream.New(natsConnect(t, s))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "E", Subjects: []string{"e.>"}})
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg("e.1")
	m.Header.Set("Nats-Expected-Last-Subject-Sequence-Subject", "e.2") // not checked by Fibril
	m.Header.Set("Nats-Expected-Last-Subject-Sequence", "0")
	if _, err := js.PublishMsg(ctx, m); err == nil || !strings.Contains(err.Error(), "Nats-Expected-Last-Subject-Sequence-Subject") {
		t.Fatalf("publish with an unchecked expectation: %v", err)
	}
	if _, err := js.Publish(ctx, "e.1", []byte("x"), jetstream.WithExpectLastSequence(5)); err == nil || !strings.Contains(err.Error(), "wrong last sequence: 0") {
		t.Fatalf("publish with a wrong expected last sequence: %v", err)
	}
	if _, err := js.Publish(ctx, "e.1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if in, err := st.Info(ctx); err != nil || in.State.Msgs != 1 {
		t.Fatalf("stored %+v %v, want only the plain publish", in, err)
	}
}
