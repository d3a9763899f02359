package broker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
)

// heldEventFsync sets up topic "q" with both logs gated, one message
// delivered, and its ack's event-log fsync held at the gate; acked gets the
// ack's answer.
func heldEventFsync(t *testing.T) (e *testEnv, tp *Topic, data, events *syncGate, acked chan error) {
	t.Helper()
	e, gateOf := gatedLogsEnv(t)
	tp = e.topic("q", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{DeadLetter: "-"})
	data, events = gateOf(tp, dataLogName), gateOf(tp, eventsLogName)
	e.publish(tp, "a")
	ds, err := g.Poll(context.Background(), 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("poll: %v %v", ds, err)
	}
	events.arm()
	acked = make(chan error, 1)
	if err := e.b.Settle(ds[0].Handle, Ack(), func(err error) { acked <- err }); err != nil {
		t.Fatal(err)
	}
	events.waitEntered(t)
	return e, tp, data, events, acked
}

// TestDataFsyncDoesNotWaitForEventFsync: the two logs are fsynced by lanes
// of their own. While an event-log fsync (an ack's) is held, a publish
// written after it gets its data fsync at once; with one syncer for both
// logs it waited for the event fsync to end. Its confirm still comes after
// the ack's events are durable: a batch waits for both of its points, and
// batches complete in order.
func TestDataFsyncDoesNotWaitForEventFsync(t *testing.T) {
	_, tp, data, events, acked := heldEventFsync(t)
	confirmed := make(chan Position, 1)
	if err := tp.PublishAsync(Message{Subject: "q", Data: []byte("b")}, func(pos Position, err error) {
		if err != nil {
			t.Errorf("publish b: %v", err)
		}
		confirmed <- pos
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's data fsynced while the event fsync is held", func() bool {
		_, last := data.Bounds()
		return last == 2 && data.Durable() == 2
	})
	select {
	case pos := <-confirmed:
		t.Fatalf("b confirmed at %v before the ack's events were durable", pos)
	case err := <-acked:
		t.Fatalf("ack answered (%v) with its event fsync held", err)
	case <-time.After(50 * time.Millisecond):
	}

	events.release(nil)
	if err := <-acked; err != nil {
		t.Fatalf("ack: %v", err)
	}
	select {
	case pos := <-confirmed:
		if pos.Seq != 2 {
			t.Fatalf("b at %v, want seq 2", pos)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("b never confirmed")
	}
}

// TestFailedEventFsyncConfirmsNothingMore: after the event log's fsync
// fails, a publish whose data fsync succeeds is not confirmed either: the
// partition confirms nothing more after a failed fsync, whichever log it
// was.
func TestFailedEventFsyncConfirmsNothingMore(t *testing.T) {
	_, tp, _, events, acked := heldEventFsync(t)
	boom := errors.New("disk gone")
	events.release(boom)
	if err := <-acked; !errors.Is(err, boom) {
		t.Fatalf("ack after a failed event fsync: %v, want %v", err, boom)
	}
	for _, s := range []string{"b", "c"} {
		_, err := tp.Publish(context.Background(), Message{Subject: "q", Data: []byte(s)})
		if !errors.Is(err, boom) {
			t.Fatalf("publish %s after a failed event fsync: %v, want %v", s, err, boom)
		}
	}
}

// TestSyncDurabilityFsyncsOnTheActor: under durability sync the actor
// fsyncs each log its round wrote before the round's completions run
// (syncRound), so a publish or an ack is durable when it is answered and no
// lane goroutine ever starts; after a failed fsync nothing more is
// confirmed.
func TestSyncDurabilityFsyncsOnTheActor(t *testing.T) {
	e, gateOf := gatedLogsEnv(t)
	tp := e.topic("q", TopicConfig{Durability: DurabilitySync})
	g := e.group(tp, "w", GroupConfig{DeadLetter: "-"})
	data, events := gateOf(tp, dataLogName), gateOf(tp, eventsLogName)
	for i := range 3 {
		pos := e.publish(tp, fmt.Sprint(i))
		if d := data.Durable(); d < pos.Seq {
			t.Fatalf("publish %d confirmed at %v with the data log durable to %d", i, pos, d)
		}
	}
	d := e.poll(g, 1)[0]
	if err := e.settle(d, Ack()); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if _, last := events.Bounds(); last == 0 || events.Durable() < last {
		t.Fatalf("ack answered with the event log durable to %d of %d", events.Durable(), last)
	}
	started := make(chan [2]bool, 1)
	if err := tp.parts[0].controlChecked(func(p *partition) { started <- [2]bool{p.lanes.data.started, p.lanes.ev.started} }); err != nil {
		t.Fatal(err)
	}
	if s := <-started; s[0] || s[1] {
		t.Fatalf("lanes started under durability sync: data %v, events %v", s[0], s[1])
	}

	boom := errors.New("disk gone")
	data.arm()
	data.release(boom)
	for _, s := range []string{"x", "y"} {
		if _, err := tp.Publish(context.Background(), Message{Subject: "q", Data: []byte(s)}); !errors.Is(err, boom) {
			t.Fatalf("publish %s after a failed data fsync: %v, want %v", s, err, boom)
		}
	}
}

// TestSyncDurabilityFailedEventFsyncConfirmsNothingMore: under durability
// sync too, after the event log's fsync fails nothing more is confirmed,
// not even a publish whose data fsync succeeds (with the log's own
// PolicySync it used to confirm later publishes).
func TestSyncDurabilityFailedEventFsyncConfirmsNothingMore(t *testing.T) {
	e, gateOf := gatedLogsEnv(t)
	tp := e.topic("q", TopicConfig{Durability: DurabilitySync})
	g := e.group(tp, "w", GroupConfig{DeadLetter: "-"})
	events := gateOf(tp, eventsLogName)
	e.publish(tp, "a")
	d := e.poll(g, 1)[0]
	boom := errors.New("disk gone")
	events.arm()
	events.release(boom)
	if err := e.settle(d, Ack()); !errors.Is(err, boom) {
		t.Fatalf("ack with a failing event fsync: %v, want %v", err, boom)
	}
	if _, err := tp.Publish(context.Background(), Message{Subject: "q", Data: []byte("b")}); !errors.Is(err, boom) {
		t.Fatalf("publish after a failed event fsync: %v, want %v", err, boom)
	}
}

// durableStore is a log for syncLane's tests: Durable reports durable.
type durableStore struct {
	seglog.Store
	durable Seq
}

func (s *durableStore) Durable() Seq { return s.durable }

// TestSyncLaneRequest: a lane starts its goroutine at its first request,
// asks only while the log is behind what the actor wrote and no fsync of
// its is outstanding, and never queues a second request.
func TestSyncLaneRequest(t *testing.T) {
	log := &durableStore{durable: 5}
	l := newSyncLane(log, false)
	starts := 0
	l.start = func() { starts++ }
	l.want.Store(5)
	if l.behind() {
		t.Fatal("behind with everything written durable")
	}
	l.request(l.behind())
	if starts != 0 || l.busy || len(l.req) != 0 {
		t.Fatal("asked for an fsync with nothing to make durable")
	}
	l.want.Store(7)
	l.request(l.behind())
	if starts != 1 || !l.busy || len(l.req) != 1 {
		t.Fatalf("behind: started %d times, busy %v, %d requests", starts, l.busy, len(l.req))
	}
	l.request(true) // busy: the outstanding fsync will report first
	if len(l.req) != 1 {
		t.Fatal("a second request queued while busy")
	}
	<-l.req
	l.busy = false // the lane reported with more=false
	l.request(true)
	if starts != 1 || len(l.req) != 1 {
		t.Fatalf("second request: started %d times, %d requests", starts, len(l.req))
	}
}

// TestSyncLanesHalt: halt says stop to the lanes' goroutines, waits for
// them, and leaves the lanes stopped.
func TestSyncLanesHalt(t *testing.T) {
	s := syncLanes{stop: make(chan struct{})}
	var exited atomic.Int32
	loop := func(*syncLane) {
		<-s.stop
		if !s.stopRequested() {
			t.Error("stopRequested false after stop")
		}
		exited.Add(1)
	}
	if s.stopRequested() {
		t.Fatal("stopRequested before halt")
	}
	s.start(&syncLane{}, loop)
	s.start(&syncLane{}, loop)
	s.halt()
	if exited.Load() != 2 || !s.stopped {
		t.Fatalf("halt returned with %d of 2 lanes exited, stopped %v", exited.Load(), s.stopped)
	}
}
