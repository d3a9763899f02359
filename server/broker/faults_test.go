package broker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// allLogs and eventLogs select the logs memstore's FailAppends fails: every
// log, or the partitions' event logs only.
func allLogs(string) bool { return true }

func eventLogs(dir string) bool { return filepath.Base(dir) == eventsLogName }

// TestAppendFailure: a failing log refuses publishes and settles with an
// error (never a false confirm) and the broker works again once the log
// does.
func TestAppendFailure(t *testing.T) {
	for _, durSync := range []bool{false, true} {
		e := newMemEnv(t, nil)
		if durSync {
			e.b.Close()
			e.durSync = true
			e.open()
		}
		tp := e.topic("q", TopicConfig{})
		g := e.group(tp, "g", GroupConfig{})
		e.publish(tp, "a")
		d := e.poll(g, 1)[0]
		e.stores.FailAppends(allLogs)
		if _, err := tp.Publish(context.Background(), Message{Subject: "q", Data: []byte("b")}); err == nil {
			t.Fatalf("sync=%v: publish confirmed while the log fails", durSync)
		}
		if err := e.settle(d, Ack()); err == nil {
			t.Fatalf("sync=%v: ack confirmed while the event log fails", durSync)
		}
		e.stores.FailAppends(nil)
		e.publish(tp, "c")
		if err := e.settle(d, Ack()); err != nil {
			t.Fatalf("sync=%v: ack after recovery: %v", durSync, err)
		}
		if got := datas(e.poll(g, 5)); len(got) != 1 || got[0] != "c" {
			t.Fatalf("sync=%v: after recovery got %v", durSync, got)
		}
	}
}

// TestCorruptSnapshotRefused: a damaged snapshot stops Open with
// ErrCorruptState instead of guessing the consumer state.
func TestCorruptSnapshotRefused(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "g", GroupConfig{})
	e.publish(tp, "a")
	e.poll(g, 1)
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	e.b = nil
	snap := filepath.Join(tp.dir, "0", snapName)
	b, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(snap, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(e.dir, e.opts()); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("open with a damaged snapshot: %v", err)
	}
	// a missing snapshot whose events were already truncated is refused too
	os.Remove(snap)
	e2 := newEnv(t, nil)
	e2.b.opts.SnapshotEvery = 1
	tp2 := e2.topic("q", TopicConfig{})
	g2 := e2.group(tp2, "g", GroupConfig{})
	for range 3 {
		e2.publish(tp2, "x")
		for _, d := range e2.poll(g2, 5) {
			if err := e2.settle(d, Ack()); err != nil {
				t.Fatal(err)
			}
		}
	}
	e2.b.Close()
	e2.b = nil
	os.Remove(filepath.Join(tp2.dir, "0", snapName))
	if _, err := Open(e2.dir, e2.opts()); err == nil {
		// the file log deletes whole segments only, so the events may all
		// still be there: then a full replay is correct
		t.Log("events still complete: replayed without the snapshot")
	} else if !errors.Is(err, ErrCorruptState) {
		t.Fatalf("open without snapshot: %v", err)
	}
}

// TestMultiPartitionLongPollAndCredit: a long poll over 3 partitions is
// answered by whichever partition gets a message; a subscription's credit
// is shared by all partitions.
func TestMultiPartitionLongPollAndCredit(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{Partitions: 3})
	g := e.group(tp, "g", GroupConfig{})
	for round := range 3 {
		ch := make(chan []Delivery, 1)
		if err := g.PollAsync(10, time.Minute, 1, func(ds []Delivery, err error) {
			out := make([]Delivery, len(ds))
			for i := range ds {
				out[i] = ds[i].clone()
			}
			ch <- out
		}); err != nil {
			t.Fatal(err)
		}
		pos, err := tp.Publish(context.Background(), Message{Subject: "q", Key: []byte{byte(round)}, Data: []byte("m")})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case ds := <-ch:
			if len(ds) != 1 || ds[0].Handle.Partition != pos.Partition {
				t.Fatalf("round %d: got %v for a message in partition %d", round, ds, pos.Partition)
			}
			if err := e.settle(ds[0], Ack()); err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: long poll not answered", round)
		}
	}
	got := make(chan Delivery, 100)
	s, err := g.Subscribe(2, 4, func(d Delivery) { got <- d })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 12 {
		if _, err := tp.Publish(context.Background(), Message{Subject: "q", Data: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "4 in flight", func() bool { return len(got) == 4 })
	waitFor(t, "inflight counted", func() bool { return g.Info().Inflight == 4 })
	if len(got) != 4 {
		t.Fatalf("credit 4 but %d delivered", len(got))
	}
	for n := 0; n < 12; n++ {
		select {
		case d := <-got:
			if err := e.settle(d, Ack()); err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of 12 delivered", n)
		}
	}
}

// TestGroupCreateFailure: a group whose start could not be recorded is not
// created, leaves no state behind, and its id is not handed out again.
func TestGroupCreateFailure(t *testing.T) {
	e := newMemEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	e.stores.FailAppends(allLogs)
	if _, err := tp.Group("g", GroupConfig{DeadLetter: "-"}); err == nil {
		t.Fatal("group created while the event log fails")
	}
	e.stores.FailAppends(nil)
	barrier(t, e.b)
	if n := len(tp.parts[0].order); n != 0 {
		t.Fatalf("%d group states left behind", n)
	}
	g := e.group(tp, "g", GroupConfig{DeadLetter: "-"})
	if g.ID() != 2 {
		t.Fatalf("group id %d, want 2 (1 was burned)", g.ID())
	}
	e.restart()
	tp, _ = e.b.Topic("q")
	if gs := tp.Groups(); len(gs) != 1 || gs[0].ID() != 2 {
		t.Fatalf("groups after restart %v", gs)
	}
}

func TestMissingTopicDirRefused(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	e.publish(tp, "a")
	e.b.Close()
	e.b = nil
	if err := os.RemoveAll(tp.dir); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(e.dir, e.opts()); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("open with a topic directory missing: %v", err)
	}
}

// TestEventLogFailure: when only the event log fails, publishes (whose data
// is durable) still succeed and settles report the failure.
func TestEventLogFailure(t *testing.T) {
	for _, durSync := range []bool{false, true} {
		e := newMemEnv(t, nil)
		if durSync {
			e.b.Close()
			e.durSync = true
			e.open()
		}
		tp := e.topic("q", TopicConfig{})
		g := e.group(tp, "g", GroupConfig{})
		e.group(tp, "keep", GroupConfig{}) // holds retention back
		e.publish(tp, "a")
		d := e.poll(g, 1)[0]
		e.stores.FailAppends(eventLogs)
		pubc, ackc := make(chan error, 1), make(chan error, 1)
		if err := tp.PublishAsync(Message{Subject: "q", Data: []byte("b")}, func(_ Position, err error) { pubc <- err }); err != nil {
			t.Fatal(err)
		}
		if err := e.b.Settle(d.Handle, Ack(), func(err error) { ackc <- err }); err != nil {
			t.Fatal(err)
		}
		if err := <-pubc; err != nil {
			t.Fatalf("sync=%v: publish failed although its data is durable: %v", durSync, err)
		}
		if err := <-ackc; err == nil {
			t.Fatalf("sync=%v: ack confirmed while the event log fails", durSync)
		}
		e.stores.FailAppends(nil)
		// The refused ack's event is written with the next round's: after
		// a crash (no snapshot at close) the message stays acked.
		e.publish(tp, "c")
		barrier(t, e.b)
		e2 := e.crashCopy()
		tp2, _ := e2.b.Topic("q")
		g2, _ := tp2.FindGroup("g")
		for _, d2 := range e2.poll(g2, 10) {
			if d2.Handle.Seq == d.Handle.Seq {
				t.Fatalf("sync=%v: acked offset %d delivered again after the log recovered", durSync, d.Handle.Seq)
			}
		}
	}
}
