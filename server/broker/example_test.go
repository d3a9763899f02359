package broker_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/fibrilmq/fibril/server/broker"
)

// Example shows the embedded use: a durable, leased, at-least-once queue in
// a directory.
func Example() {
	dir, err := os.MkdirTemp("", "fibril-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	b, err := broker.Open(dir, broker.Options{SegmentSize: 1 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	orders, err := b.CreateTopic("orders", broker.TopicConfig{Partitions: 1})
	if err != nil {
		log.Fatal(err)
	}
	workers, err := orders.Group("workers", broker.GroupConfig{LeaseMs: 30000, MaxDeliveries: 3})
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	for _, item := range []string{"apple", "pear"} {
		pos, err := orders.Publish(ctx, broker.Message{Subject: "orders", Data: []byte(item)})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("stored at", pos)
	}

	ds, err := workers.Poll(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range ds {
		fmt.Printf("got %s (attempt %d, handle %s)\n", d.Data, d.Attempt, d.Handle)
		if string(d.Data) == "pear" {
			// not now: it comes back, with attempt 2
			if err := d.Nack(ctx, 0); err != nil {
				log.Fatal(err)
			}
			continue
		}
		if err := d.Ack(ctx); err != nil {
			log.Fatal(err)
		}
	}
	ds, err = workers.Poll(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("again %s (attempt %d)\n", ds[0].Data, ds[0].Attempt)
	if err := ds[0].Ack(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// stored at 0:1
	// stored at 0:2
	// got apple (attempt 1, handle $F.1.1.0.1.1)
	// got pear (attempt 1, handle $F.1.1.0.2.1)
	// again pear (attempt 2)
}
