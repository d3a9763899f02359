package queue_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/queue"
	"github.com/fibrilmq/fibril/queue/boltstore"
	bolt "go.etcd.io/bbolt"
)

// The queue benchmarks move b.N messages of 1 KiB through a queue: P
// producers publish b.N/P each while one consumer takes them out, up to 64
// in flight, and acks each; an op is one message published, delivered and
// acked, msgs/s is b.N over the whole run. BENCHMARKS.md ("The embedded
// queue") has the command and the figures.

const benchMsgSize = 1024

var benchPayload = func() []byte {
	p := make([]byte, benchMsgSize)
	for i := range p {
		p[i] = byte(i*7 + 1)
	}
	return p
}()

// BenchmarkQueue: the embedded queue on the segment log and on boltstore,
// under each durability, with 1 and 4 producers and one Consume of 64
// workers.
func BenchmarkQueue(b *testing.B) {
	for _, store := range []string{"seglog", "boltstore"} {
		for _, dur := range []queue.Durability{queue.DurabilitySync, queue.DurabilityGroup, queue.DurabilityNone} {
			for _, producers := range []int{1, 4} {
				b.Run(fmt.Sprintf("store=%s/durability=%s/producers=%d", store, dur, producers), func(b *testing.B) {
					benchQueue(b, store, dur, producers)
				})
			}
		}
	}
}

func benchQueue(b *testing.B, store string, dur queue.Durability, producers int) {
	dir := b.TempDir()
	opts := queue.Options{Logf: b.Logf}
	if store == "boltstore" {
		st, err := boltstore.Open(filepath.Join(dir, "app.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close() // after db.Close below
		opts.Storage = st
	}
	db, err := queue.Open(filepath.Join(dir, "q"), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	q, err := queue.Declare(db, "bench", queue.Config[[]byte]{Durability: dur})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for p := range producers {
		n := b.N / producers
		if p < b.N%producers {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				if err := q.Publish(ctx, benchPayload); err != nil {
					b.Error(err)
					stop() // the consumer would wait for it forever
					return
				}
			}
		}()
	}
	var acked atomic.Int64
	err = q.Consume(cctx, 64, func(ctx context.Context, d *queue.Delivery[[]byte]) error {
		if err := d.Ack(ctx); err != nil {
			return err
		}
		if acked.Add(1) == int64(b.N) {
			stop()
		}
		return nil
	})
	stop()
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkBoltHandQueue is the baseline: the durable queue a Go
// programmer writes by hand on bbolt. A publish is one Update putting the
// message under the bucket's next sequence number (big-endian); the
// consumer reads up to 64 messages in a View, handles them, then deletes
// them in one Update. sync is bbolt's default (fdatasync at each commit),
// none opens the DB with NoSync.
func BenchmarkBoltHandQueue(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		for _, producers := range []int{1, 4} {
			name := "sync"
			if noSync {
				name = "none"
			}
			b.Run(fmt.Sprintf("durability=%s/producers=%d", name, producers), func(b *testing.B) {
				benchHandQueue(b, noSync, producers)
			})
		}
	}
}

func benchHandQueue(b *testing.B, noSync bool, producers int) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "hand.db"), 0o600, &bolt.Options{NoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	bucket := []byte("queue")
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket(bucket)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for p := range producers {
		n := b.N / producers
		if p < b.N%producers {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				err := db.Update(func(tx *bolt.Tx) error {
					bk := tx.Bucket(bucket)
					seq, err := bk.NextSequence()
					if err != nil {
						return err
					}
					return bk.Put(binary.BigEndian.AppendUint64(nil, seq), benchPayload)
				})
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	for done := 0; done < b.N; {
		var keys [][]byte
		if err := db.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucket).Cursor()
			for k, v := c.First(); k != nil && len(keys) < 64; k, v = c.Next() {
				_ = v // handle the message
				keys = append(keys, append([]byte(nil), k...))
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if len(keys) == 0 {
			time.Sleep(100 * time.Microsecond) // nothing yet: poll
			continue
		}
		if err := db.Update(func(tx *bolt.Tx) error {
			bk := tx.Bucket(bucket)
			for _, k := range keys {
				if err := bk.Delete(k); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		done += len(keys)
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
