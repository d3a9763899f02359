package stocknats

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// wantJSErr fails unless err is JetStream's API error with that code and
// description.
func wantJSErr(t *testing.T, what string, err error, code jetstream.ErrorCode, desc string) {
	t.Helper()
	var ae *jetstream.APIError
	if !errors.As(err, &ae) || ae.ErrorCode != code || ae.Description != desc {
		t.Fatalf("%s: %v (%+v), want %d %q", what, err, ae, code, desc)
	}
}

// TestJetStreamExpectLastSequence: Nats-Expected-Last-Sequence stores a
// publish only when the stream's last sequence is the one given (0: empty
// stream), else answers 10071 "wrong last sequence: N"; the same on Fibril
// and nats-server.
func TestJetStreamExpectLastSequence(t *testing.T) {
	bothJS(t, func(t *testing.T, tg target) {
		_, js, ctx := jsConnect(t, tg)
		s := must[jetstream.Stream](t, "CreateStream")(js.CreateStream(ctx, jetstream.StreamConfig{
			Name: "SEQ", Subjects: []string{"seq.>"}}))
		_, err := js.Publish(ctx, "seq.a", []byte("x"), jetstream.WithExpectLastSequence(3))
		wantJSErr(t, "expect 3 on an empty stream", err, 10071, "wrong last sequence: 0")
		if ack := must[*jetstream.PubAck](t, "expect 0")(js.Publish(ctx, "seq.a", []byte("1"), jetstream.WithExpectLastSequence(0))); ack.Sequence != 1 {
			t.Fatalf("expect 0: %+v", ack)
		}
		if ack := must[*jetstream.PubAck](t, "expect 1")(js.Publish(ctx, "seq.b", []byte("2"), jetstream.WithExpectLastSequence(1))); ack.Sequence != 2 {
			t.Fatalf("expect 1: %+v", ack)
		}
		_, err = js.Publish(ctx, "seq.a", []byte("x"), jetstream.WithExpectLastSequence(1))
		wantJSErr(t, "expect 1 after 2", err, 10071, "wrong last sequence: 2")
		f := must[jetstream.PubAckFuture](t, "PublishAsync")(js.PublishAsync("seq.a", []byte("x"), jetstream.WithExpectLastSequence(7)))
		select {
		case ack := <-f.Ok():
			t.Fatalf("async publish expecting 7 stored: %+v", ack)
		case err := <-f.Err():
			wantJSErr(t, "async expect 7", err, 10071, "wrong last sequence: 2")
		case <-ctx.Done():
			t.Fatal("no async answer")
		}
		if in := must[*jetstream.StreamInfo](t, "Info")(s.Info(ctx)); in.State.Msgs != 2 {
			t.Fatalf("%d messages stored, want 2", in.State.Msgs)
		}
	})
}

// TestJetStreamExpectStream: Nats-Expected-Stream naming another stream
// is answered 10060 "expected stream does not match"; naming the stream
// that captures the subject, it is stored.
func TestJetStreamExpectStream(t *testing.T) {
	bothJS(t, func(t *testing.T, tg target) {
		_, js, ctx := jsConnect(t, tg)
		s := must[jetstream.Stream](t, "CreateStream")(js.CreateStream(ctx, jetstream.StreamConfig{
			Name: "NAMED", Subjects: []string{"named.>"}}))
		_, err := js.Publish(ctx, "named.a", []byte("x"), jetstream.WithExpectStream("OTHER"))
		wantJSErr(t, "expect OTHER", err, 10060, "expected stream does not match")
		if ack := must[*jetstream.PubAck](t, "expect NAMED")(js.Publish(ctx, "named.a", []byte("x"), jetstream.WithExpectStream("NAMED"))); ack.Sequence != 1 || ack.Stream != "NAMED" {
			t.Fatalf("expect NAMED: %+v", ack)
		}
		if in := must[*jetstream.StreamInfo](t, "Info")(s.Info(ctx)); in.State.Msgs != 1 {
			t.Fatalf("%d messages stored, want 1", in.State.Msgs)
		}
	})
}

// TestJetStreamExpectLastSubjectSequence: Nats-Expected-Last-Subject-Sequence
// is the last sequence of the publish's own subject (0: none); a mismatch
// is answered 10071 naming that subject's last sequence, as a key-value
// compare-and-set needs.
func TestJetStreamExpectLastSubjectSequence(t *testing.T) {
	bothJS(t, func(t *testing.T, tg target) {
		_, js, ctx := jsConnect(t, tg)
		s := must[jetstream.Stream](t, "CreateStream")(js.CreateStream(ctx, jetstream.StreamConfig{
			Name: "KV", Subjects: []string{"kv.>"}}))
		create := func(subject string, seq uint64) (*jetstream.PubAck, error) {
			m := nats.NewMsg(subject)
			m.Data = []byte("v")
			return js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(seq))
		}
		if ack := must[*jetstream.PubAck](t, "create a")(create("kv.a", 0)); ack.Sequence != 1 {
			t.Fatalf("create a: %+v", ack)
		}
		if ack := must[*jetstream.PubAck](t, "create b")(create("kv.b", 0)); ack.Sequence != 2 {
			t.Fatalf("create b: %+v", ack)
		}
		_, err := create("kv.a", 0)
		wantJSErr(t, "create a again", err, 10071, "wrong last sequence: 1")
		_, err = create("kv.b", 1)
		wantJSErr(t, "update b at 1", err, 10071, "wrong last sequence: 2")
		if ack := must[*jetstream.PubAck](t, "update a at 1")(create("kv.a", 1)); ack.Sequence != 3 {
			t.Fatalf("update a at 1: %+v", ack)
		}
		_, err = create("kv.a", 1)
		wantJSErr(t, "update a at 1 again", err, 10071, "wrong last sequence: 3")
		if in := must[*jetstream.StreamInfo](t, "Info")(s.Info(ctx)); in.State.Msgs != 3 {
			t.Fatalf("%d messages stored, want 3", in.State.Msgs)
		}
	})
}
