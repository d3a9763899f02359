package queue_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/queue"
	"github.com/fibrilmq/fibril/queue/boltstore"
	"github.com/fibrilmq/fibril/server/seglog"
	"github.com/fibrilmq/fibril/server/seglog/storetest"
)

// TestMemoryStorageConformance runs the shared store suite on the logs
// queue.Memory hands out.
func TestMemoryStorageConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dir string) seglog.Store {
		s, err := queue.Memory().OpenLog("topics/1/0/data", seglog.PolicySync)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, storetest.Options{DurableOnAppend: true, UnverifiedCRC: true})
}

var _ queue.Storage = (*boltstore.Storage)(nil)

// TestBoltStorageRecovers: a DB on boltstore, under each durability,
// keeps what was published and not acked across a close and reopen, the
// messages in flight at the close ready again and the acked ones gone.
func TestBoltStorageRecovers(t *testing.T) {
	for _, dur := range []queue.Durability{queue.DurabilitySync, queue.DurabilityGroup, queue.DurabilityNone} {
		t.Run(string(dur), func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			open := func() (*boltstore.Storage, *queue.DB, *queue.Queue[int]) {
				st, err := boltstore.Open(filepath.Join(dir, "app.db"))
				if err != nil {
					t.Fatal(err)
				}
				db, err := queue.Open(filepath.Join(dir, "q"), queue.Options{Storage: st, Logf: t.Logf})
				if err != nil {
					st.Close()
					t.Fatal(err)
				}
				q, err := queue.Declare(db, "jobs", queue.Config[int]{Durability: dur, Partitions: 2, Lease: time.Hour})
				if err != nil {
					db.Close()
					st.Close()
					t.Fatal(err)
				}
				return st, db, q
			}
			st, db, q := open()
			for i := range 50 {
				if err := q.Publish(ctx, i); err != nil {
					t.Fatal(err)
				}
			}
			acked := map[int]bool{}
			for len(acked) < 10 {
				ds, err := q.Fetch(ctx, 20)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range ds {
					if len(acked) < 10 {
						if err := d.Ack(ctx); err != nil {
							t.Fatal(err)
						}
						acked[d.Value] = true
					} // the rest stay in flight
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}

			st, db, q = open()
			defer st.Close()
			defer db.Close()
			st2, err := q.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st2.Ready != 40 || st2.InFlight != 0 {
				t.Fatalf("after reopen: %+v, want 40 ready", st2)
			}
			got := map[int]bool{}
			for len(got) < 40 {
				ds, err := q.Fetch(ctx, 40)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range ds {
					if acked[d.Value] || got[d.Value] {
						t.Fatalf("%d delivered again after its ack, or twice", d.Value)
					}
					got[d.Value] = true
					if err := d.Ack(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			if len(got)+len(acked) != 50 {
				t.Fatalf("%d + %d of 50", len(got), len(acked))
			}
		})
	}
}
