package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/queue"
	"github.com/fibrilmq/fibril/queue/boltstore"
)

type Order struct {
	ID    int    `json:"id"`
	Item  string `json:"item"`
	Count int    `json:"count"`
}

// Example opens a directory, declares a queue of Order, publishes, fetches
// with leases, acks one and nacks the other (which comes back), and closes.
func Example() {
	dir, err := os.MkdirTemp("", "queue-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	db, err := queue.Open(dir, queue.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	orders, err := queue.Declare(db, "orders", queue.Config[Order]{Lease: 30 * time.Second})
	if err != nil {
		log.Fatal(err)
	}

	for i, item := range []string{"apple", "pear"} {
		// Returns once the order is on disk (fsynced).
		if err := orders.Publish(ctx, Order{ID: i + 1, Item: item, Count: 3}); err != nil {
			log.Fatal(err)
		}
	}
	ds, err := orders.Fetch(ctx, 10) // leased to us for 30s
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range ds {
		fmt.Printf("order %d: %d %s (attempt %d)\n", d.Value.ID, d.Value.Count, d.Value.Item, d.Attempt)
		if d.Value.Item == "pear" {
			err = d.Nack(ctx, 0) // not now: delivered again
		} else {
			err = d.Ack(ctx) // done, for good
		}
		if err != nil {
			log.Fatal(err)
		}
	}
	ds, err = orders.Fetch(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("again order %d (attempt %d)\n", ds[0].Value.ID, ds[0].Attempt)
	if err := ds[0].Ack(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// order 1: 3 apple (attempt 1)
	// order 2: 3 pear (attempt 1)
	// again order 2 (attempt 2)
}

// ExampleQueue_Consume is a worker pool in one process: four workers share
// a queue of jobs, each acked when its handler returns nil.
func ExampleQueue_Consume() {
	db, err := queue.OpenMemory(queue.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	jobs, err := queue.Declare(db, "jobs", queue.Config[int]{})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for n := 1; n <= 20; n++ {
		if err := jobs.Publish(ctx, n); err != nil {
			log.Fatal(err)
		}
	}

	var mu sync.Mutex
	sum, done := 0, 0
	err = jobs.Consume(ctx, 4, func(ctx context.Context, d *queue.Delivery[int]) error {
		mu.Lock()
		defer mu.Unlock()
		sum += d.Value * d.Value
		if done++; done == 20 {
			cancel() // all done: stop the pool
		}
		return nil // ack
	})
	if err != nil {
		log.Fatal(err)
	}
	st, err := jobs.Stats(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sum of squares:", sum)
	fmt.Println("acked:", st.Acked, "pending:", st.Pending)
	// Output:
	// sum of squares: 2870
	// acked: 20 pending: 0
}

// ExampleRetryAfter is a delayed retry: the handler fails the first attempt
// with RetryAfter, and the message comes back 50 ms later.
func ExampleRetryAfter() {
	db, err := queue.OpenMemory(queue.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	mails, err := queue.Declare(db, "mails", queue.Config[string]{})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := mails.Publish(ctx, "hello@example.com"); err != nil {
		log.Fatal(err)
	}
	var first time.Time
	err = mails.Consume(ctx, 1, func(ctx context.Context, d *queue.Delivery[string]) error {
		if d.Attempt == 1 {
			first = time.Now()
			fmt.Println("attempt 1: mail server busy, retry in 50ms")
			return queue.RetryAfter(50*time.Millisecond, errors.New("421 busy"))
		}
		fmt.Printf("attempt %d: sent to %s, waited >= 50ms: %v\n", d.Attempt, d.Value, time.Since(first) >= 50*time.Millisecond)
		cancel()
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// attempt 1: mail server busy, retry in 50ms
	// attempt 2: sent to hello@example.com, waited >= 50ms: true
}

// Example_gracefulShutdown stops a worker pool in the middle of its work:
// the handlers see their context end and give their jobs up, which go back
// to the queue at once and are there, ready, when the directory is opened
// again.
func Example_gracefulShutdown() {
	dir, err := os.MkdirTemp("", "queue-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := queue.Open(dir, queue.Options{})
	if err != nil {
		log.Fatal(err)
	}
	jobs, err := queue.Declare(db, "jobs", queue.Config[string]{})
	if err != nil {
		log.Fatal(err)
	}
	ctx, shutdown := context.WithCancel(context.Background())
	for _, j := range []string{"a", "b", "c", "d", "e"} {
		if err := jobs.Publish(ctx, j); err != nil {
			log.Fatal(err)
		}
	}

	var started sync.WaitGroup
	started.Add(3)
	go func() {
		started.Wait() // three jobs in flight: a signal arrives
		shutdown()
	}()
	var mu sync.Mutex
	var gaveUp []string
	err = jobs.Consume(ctx, 3, func(ctx context.Context, d *queue.Delivery[string]) error {
		started.Done()
		<-ctx.Done() // a long job, interrupted
		mu.Lock()
		gaveUp = append(gaveUp, d.Value)
		mu.Unlock()
		return ctx.Err() // not done: back to the queue
	})
	if err != nil {
		log.Fatal(err)
	}
	sort.Strings(gaveUp)
	fmt.Println("given back:", gaveUp)
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}

	db, err = queue.Open(dir, queue.Options{}) // the next start
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	jobs, err = queue.Declare(db, "jobs", queue.Config[string]{})
	if err != nil {
		log.Fatal(err)
	}
	st, err := jobs.Stats(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ready after restart:", st.Ready, "in flight:", st.InFlight)
	// Output:
	// given back: [a b c]
	// ready after restart: 5 in flight: 0
}

// ExampleQueue_DeadLetters shows a message the codec cannot decode: it
// never reaches a handler, and lands in the dead-letter queue with the
// reason.
func ExampleQueue_DeadLetters() {
	db, err := queue.OpenMemory(queue.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	raw, err := queue.Declare(db, "orders", queue.Config[[]byte]{}) // same queue, raw bytes
	if err != nil {
		log.Fatal(err)
	}
	orders, err := queue.Declare(db, "orders", queue.Config[Order]{})
	if err != nil {
		log.Fatal(err)
	}
	if err := raw.Publish(ctx, []byte(`{"id": "not a number"}`)); err != nil {
		log.Fatal(err)
	}
	if err := orders.Publish(ctx, Order{ID: 7, Item: "fig", Count: 1}); err != nil {
		log.Fatal(err)
	}
	ds, err := orders.Fetch(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("handed out:", len(ds), "order", ds[0].Value.ID)
	if err := ds[0].Ack(ctx); err != nil {
		log.Fatal(err)
	}

	dead, err := orders.DeadLetters()
	if err != nil {
		log.Fatal(err)
	}
	ds2, err := dead.Fetch(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	d := ds2[0]
	fmt.Println(dead.Name(), d.Header("Fibril-Reason"), string(d.Value))
	fmt.Println(d.Header("Fibril-Error"))
	// Output:
	// handed out: 1 order 7
	// $DLQ.orders.workers decode_error {"id": "not a number"}
	// json: cannot unmarshal string into Go struct field Order.id of type int
}

// Example_boltstore keeps the queues' messages in a bbolt file (one the
// program may already use for its own buckets): publish, close, open again,
// and the messages are still there.
func Example_boltstore() {
	dir, err := os.MkdirTemp("", "queue-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	open := func() (*boltstore.Storage, *queue.DB, *queue.Queue[string]) {
		st, err := boltstore.Open(filepath.Join(dir, "app.db")) // or boltstore.New(yourDB)
		if err != nil {
			log.Fatal(err)
		}
		// The directory still holds the engine's small catalog.
		db, err := queue.Open(filepath.Join(dir, "queues"), queue.Options{Storage: st})
		if err != nil {
			log.Fatal(err)
		}
		jobs, err := queue.Declare(db, "resize", queue.Config[string]{})
		if err != nil {
			log.Fatal(err)
		}
		return st, db, jobs
	}

	st, db, jobs := open()
	for _, img := range []string{"a.png", "b.png"} {
		if err := jobs.Publish(ctx, img); err != nil { // committed to app.db
			log.Fatal(err)
		}
	}
	db.Close() // the DB first, then its Storage
	st.Close()

	st, db, jobs = open()
	defer st.Close()
	defer db.Close()
	ds, err := jobs.Fetch(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range ds {
		fmt.Println("resize", d.Value)
		if err := d.Ack(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// resize a.png
	// resize b.png
}
