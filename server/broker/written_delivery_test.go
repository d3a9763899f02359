package broker

import (
	"errors"
	"fmt"
	"github.com/fibrilmq/fibril/internal/crashfs"
	"github.com/fibrilmq/fibril/server/seglog"
	"path/filepath"
	"testing"
	"time"
)

// TestRecoveryForgetsDeliveriesOfLostRecords: records are leased as soon as
// they are written and both logs are fsynced in parallel, so a crash can
// keep the event log's record of a delivery while the data log loses the
// record itself. After recovery that offset must count as never delivered:
// the message published there next is delivered as attempt 1, not as a
// redelivery (which would also count towards dead-lettering).
func TestRecoveryForgetsDeliveriesOfLostRecords(t *testing.T) {
	e := newMemEnv(t, nil)
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{MaxDeliveries: 2, DeadLetter: "-"})
	for i := 0; i < 5; i++ {
		e.publish(tp, fmt.Sprint("old", i))
	}
	if ds := e.pollNow(g, 5, 1); len(ds) != 5 {
		t.Fatalf("poll got %d, want 5", len(ds))
	}
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	e.b = nil
	// The crash: the data log lost its last three records; the event log
	// kept their deliveries.
	dataDir := filepath.Join(tp.dir, "0", dataLogName)
	if err := e.stores.LoseTail(dataDir, 2); err != nil {
		t.Fatal(err)
	}
	e.open()
	tp, _ = e.b.Topic("q")
	g, _ = tp.FindGroup("w")
	for i := 0; i < 3; i++ {
		e.publish(tp, fmt.Sprint("new", i))
	}
	ds := e.pollNow(g, 10, 2)
	got := map[string]uint32{}
	for _, d := range ds {
		got[string(d.Data)] = d.Attempt
	}
	for i := 0; i < 2; i++ { // leased before the crash: redelivered
		if a := got[fmt.Sprint("old", i)]; a != 2 {
			t.Errorf("old%d: attempt %d, want 2 (redelivery of a durable record)", i, a)
		}
	}
	for i := 0; i < 3; i++ { // published at the lost offsets: first delivery
		if a := got[fmt.Sprint("new", i)]; a != 1 {
			t.Errorf("new%d: attempt %d, want 1 (deliveries: %v)", i, a, got)
		}
	}
	if len(ds) != 5 {
		t.Errorf("delivered %d, want 5: %v", len(ds), got)
	}
}

// TestFailedDataSyncDeliversNothing: a waiting poll is leased a record as
// soon as it is written, but the answer waits for the data fsync; when
// that fsync fails, the poll gets the error and never the record (which
// may not be on disk), and the publish is not confirmed.
func TestFailedDataSyncDeliversNothing(t *testing.T) {
	ff := crashfs.New(seglog.OSFS())
	e := newEnvWith(t, func(o *Options) {
		o.OpenStore = func(dir string, policy seglog.Policy) (seglog.Store, error) {
			so := seglog.Options{Policy: policy, SegmentSize: 64 << 10}
			if filepath.Base(dir) == dataLogName {
				so.FS = ff
			}
			return seglog.Open(dir, so)
		}
	})
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{})
	polled := make(chan error, 1)
	var got []Delivery
	if err := g.PollAsync(10, 5*time.Second, 1, func(ds []Delivery, err error) {
		for _, d := range ds {
			got = append(got, d.clone())
		}
		polled <- err
	}); err != nil {
		t.Fatal(err)
	}
	ff.FailSyncs(errors.New("injected fsync failure"))
	pub := make(chan error, 1)
	if err := tp.PublishAsync(Message{Subject: "q", Data: []byte("not durable")}, func(_ Position, err error) { pub <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-pub; err == nil {
		t.Fatal("publish confirmed although its fsync failed")
	}
	select {
	case err := <-polled:
		if err == nil || len(got) != 0 {
			t.Fatalf("poll after a failed data fsync: err %v, deliveries %d (want an error and none)", err, len(got))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("poll not answered")
	}
}
