package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSnapshotWrittenInBackground: snapshots are written off the actor
// (snapshotAsync) while the partition keeps serving; they still land,
// still drop the events the previous snapshot covered, and a restart from
// them restores the state (nothing acked comes back).
func TestSnapshotWrittenInBackground(t *testing.T) {
	e := newEnv(t, nil)
	e.b.opts.SnapshotEvery = 5
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{})
	const n = 300
	for i := 0; i < n; i++ {
		e.publish(tp, fmt.Sprint(i))
		ds := e.poll(g, 1)
		if len(ds) != 1 {
			t.Fatalf("message %d: poll got %d", i, len(ds))
		}
		if err := e.settle(ds[0], Ack()); err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
	}
	p := tp.parts[0]
	deadline := time.Now().Add(10 * time.Second)
	for {
		first, _ := p.events.Bounds()
		_, err := os.Stat(filepath.Join(p.dir, snapName))
		if err == nil && first > 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no background snapshot: snapshot file err %v, first event %d", err, first)
		}
		e.publish(tp, "nudge") // a round that commits events may start the next one
		for _, d := range e.pollNowAll(g) {
			_ = e.settle(d, Ack())
		}
		time.Sleep(time.Millisecond)
	}
	e.restart()
	tp, _ = e.b.Topic("q")
	g, _ = tp.FindGroup("w")
	if ds := e.pollNow(g, 10, 1); len(ds) != 0 {
		t.Fatalf("after restart %d acked messages came back: first %q", len(ds), ds[0].Data)
	}
}

// pollNowAll takes whatever is ready without waiting.
func (e *testEnv) pollNowAll(g *Group) []Delivery { return e.pollNow(g, 100, 1) }
