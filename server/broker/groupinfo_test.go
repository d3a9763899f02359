package broker

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

// TestInfoCurrentCountsAnsweredPollAndAck: right after a poll's answer and
// an ack's callback, InfoCurrent already counts them (Info alone may lag
// until the actor's round ends; the server's GROUP INFO relies on this).
func TestInfoCurrentCountsAnsweredPollAndAck(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("jobs", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{})
	ctx := context.Background()
	for round := 0; round < 20; round++ {
		e.publish(tp, "m")
		ds := e.poll(g, 1)
		if len(ds) != 1 {
			t.Fatalf("round %d: polled %d", round, len(ds))
		}
		in, err := g.InfoCurrent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if in.Inflight != 1 || in.Delivered != uint64(round+1) {
			t.Fatalf("round %d after poll: inflight %d delivered %d", round, in.Inflight, in.Delivered)
		}
		if got, want := in.Partitions[0].Next, ds[0].Handle.Seq+1; got != want {
			t.Fatalf("round %d: next %d, want %d", round, got, want)
		}
		if err := e.settle(ds[0], Ack()); err != nil {
			t.Fatal(err)
		}
		in, err = g.InfoCurrent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if in.Inflight != 0 || in.Pending != 0 || in.Acked != uint64(round+1) {
			t.Fatalf("round %d after ack: inflight %d pending %d acked %d", round, in.Inflight, in.Pending, in.Acked)
		}
		if got, want := in.Partitions[0].Frontier, ds[0].Handle.Seq+1; got != want {
			t.Fatalf("round %d: frontier %d, want %d", round, got, want)
		}
	}
}

// TestConfigResolveMatchesCreated: Resolve of the requested config equals
// what the created topic/group report, so a server can answer a repeated
// CREATE idempotently.
func TestConfigResolveMatchesCreated(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("orders", TopicConfig{Partitions: 2})
	got, err := TopicConfig{Partitions: 2}.Resolve("orders")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, tp.Config()) {
		t.Fatalf("resolved %+v, created %+v", got, tp.Config())
	}
	if other, _ := (TopicConfig{Partitions: 3}).Resolve("orders"); reflect.DeepEqual(other, tp.Config()) {
		t.Fatal("different partitions resolved equal")
	}
	g := e.group(tp, "billing", GroupConfig{LeaseMs: 500})
	gc, err := GroupConfig{LeaseMs: 500}.Resolve("orders", "billing")
	if err != nil {
		t.Fatal(err)
	}
	if !gc.Equal(g.Config()) {
		t.Fatalf("resolved %+v, created %+v", gc, g.Config())
	}
	if _, err := (TopicConfig{Durability: "bogus"}).Resolve("x"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bogus durability: %v", err)
	}
}

// TestGroupNATSAckPersisted: nats_ack defaults to auto, explicit survives
// a restart (it lives in the catalog), anything else is ErrInvalid.
func TestGroupNATSAckPersisted(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("jobs", TopicConfig{})
	if g := e.group(tp, "auto", GroupConfig{}); g.Config().NATSAck != NATSAckAuto {
		t.Fatalf("default nats_ack %q", g.Config().NATSAck)
	}
	e.group(tp, "exp", GroupConfig{NATSAck: NATSAckExplicit})
	if _, err := tp.Group("bad", GroupConfig{NATSAck: "sometimes"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad nats_ack: %v", err)
	}
	e.restart()
	tp, _ = e.b.Topic("jobs")
	g, ok := tp.FindGroup("exp")
	if !ok || g.Config().NATSAck != NATSAckExplicit {
		t.Fatalf("after restart: %v %+v", ok, g.Config())
	}
}
