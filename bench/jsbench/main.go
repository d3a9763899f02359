// Command jsbench is the JetStream side-by-side benchmark of issue 28: one
// nats.go jetstream program (async publish with PubAcks, then Consume with
// explicit acks, 1 KiB) against any server speaking the JetStream API
// (fibril serve, nats-server -js). It prints one line of rates.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	url := flag.String("url", nats.DefaultURL, "server URL")
	n := flag.Int("n", 100000, "messages")
	size := flag.Int("size", 1024, "payload bytes")
	flag.Parse()
	if err := run(*url, *n, *size); err != nil {
		log.Fatal(err)
	}
}

func run(url string, n, size int) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_ = js.DeleteStream(ctx, "BENCH")
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench.>"}, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		return fmt.Errorf("create stream: %w", err)
	}
	payload := make([]byte, size)
	start := time.Now()
	for range n {
		if _, err := js.PublishAsync("bench.x", payload, jetstream.WithStallWait(time.Minute)); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	pub := time.Since(start)
	c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "bench"})
	if err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	var got atomic.Int64
	done := make(chan struct{})
	start = time.Now()
	cc, err := c.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		if got.Add(1) == int64(n) {
			close(done)
		}
	})
	if err != nil {
		return err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("consumed %d of %d: %w", got.Load(), n, ctx.Err())
	}
	con := time.Since(start)
	cc.Stop()
	fmt.Printf("publish %.0f msg/s  consume %.0f msg/s  (%d x %d B)\n", float64(n)/pub.Seconds(), float64(n)/con.Seconds(), n, size)
	return nil
}
