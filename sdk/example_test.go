package fibril_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

// exampleTopic returns a fresh topic name, so examples can run repeatedly
// against one server.
func exampleTopic(name string) string {
	return "examples." + name + "." + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// A work queue: publish with a confirm, pull, process, acknowledge.
func Example() {
	ctx := context.Background()
	c, err := fibril.Connect(ctx, serverURL, fibril.WithName("billing-worker"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	orders := exampleTopic("orders")
	if _, err := c.CreateTopic(ctx, orders, fibril.TopicConfig{Partitions: 1, Durability: "sync"}); err != nil {
		log.Fatal(err)
	}
	if _, err := c.CreateGroup(ctx, orders, "billing", fibril.GroupConfig{LeaseMs: 30000, MaxDeliveries: 5}); err != nil {
		log.Fatal(err)
	}

	pos, err := c.Publish(ctx, orders, []byte("order 42"), fibril.WithKey("customer-7"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored at", pos)

	msgs, err := c.Fetch(ctx, orders, "billing", 10, time.Second)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Printf("%s (delivery %d, key %s)\n", m.Data, m.DeliveryCount(), m.Header.Get(fibril.HeaderKey))
		if err := m.Ack(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// stored at 0:1
	// order 42 (delivery 1, key customer-7)
}

// Pipelined publishing: many publishes in flight, one confirm each.
func ExampleConn_PublishAsync() {
	ctx := context.Background()
	c, err := fibril.Connect(ctx, serverURL)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	events := exampleTopic("events")
	if _, err := c.CreateTopic(ctx, events, fibril.TopicConfig{}); err != nil {
		log.Fatal(err)
	}

	var futs []*fibril.PubFuture
	for i := range 1000 {
		f, err := c.PublishAsync(ctx, events, []byte(fmt.Sprint("event ", i)))
		if err != nil {
			log.Fatal(err)
		}
		futs = append(futs, f)
	}
	last := fibril.Position{}
	for _, f := range futs {
		if last, err = f.Wait(ctx); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("last stored at", last)
	// Output: last stored at 0:1000
}

// A worker: Consume runs the handler for every message, four at a time.
// Returning nil acks the message; returning an error nacks it for a retry.
func ExampleConn_Consume() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := fibril.Connect(ctx, serverURL)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	jobs := exampleTopic("jobs")
	if _, err := c.CreateTopic(ctx, jobs, fibril.TopicConfig{}); err != nil {
		log.Fatal(err)
	}
	for i := range 3 {
		if _, err := c.Publish(ctx, jobs, []byte(fmt.Sprint("job ", i))); err != nil {
			log.Fatal(err)
		}
	}

	done := 0
	tries := map[string]int{}
	err = c.Consume(ctx, jobs, "workers", func(ctx context.Context, m *fibril.Msg) error {
		tries[string(m.Data)]++
		if string(m.Data) == "job 1" && m.DeliveryCount() == 1 {
			return errors.New("transient failure") // nacked: delivered again
		}
		if done++; done == 3 {
			cancel() // stop after three jobs
		}
		return nil
	}, fibril.WithConcurrency(1), fibril.WithMaxInFlight(8))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("job 0 tries:", tries["job 0"], "job 1 tries:", tries["job 1"])
	// Output: job 0 tries: 1 job 1 tries: 2
}

// The iterator form: range over the group's messages and settle each.
func ExampleConn_Messages() {
	ctx := context.Background()
	c, err := fibril.Connect(ctx, serverURL)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	mail := exampleTopic("mail")
	if _, err := c.CreateTopic(ctx, mail, fibril.TopicConfig{}); err != nil {
		log.Fatal(err)
	}
	for _, s := range []string{"hello", "world"} {
		if _, err := c.Publish(ctx, mail, []byte(s)); err != nil {
			log.Fatal(err)
		}
	}
	n := 0
	for m, err := range c.Messages(ctx, mail, "senders") {
		if err != nil { // a corrupt delivery: never data
			log.Print(err)
			continue
		}
		fmt.Println(string(m.Data))
		if err := m.Ack(ctx); err != nil {
			log.Fatal(err)
		}
		if n++; n == 2 {
			break
		}
	}
	// Output:
	// hello
	// world
}

// The fast pull loop: a Fetcher keeps POLLs in flight while a batch is
// handled, and AckAllAsync acknowledges the batch without waiting for the
// server's commit; the futures are checked as they complete.
func ExampleConn_NewFetcher() {
	ctx := context.Background()
	c, err := fibril.Connect(ctx, serverURL)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	logs := exampleTopic("logs")
	if _, err := c.CreateTopic(ctx, logs, fibril.TopicConfig{}); err != nil {
		log.Fatal(err)
	}
	for i := range 25 {
		if _, err := c.PublishAsync(ctx, logs, []byte(fmt.Sprint("line ", i))); err != nil {
			log.Fatal(err)
		}
	}
	if err := c.Flush(ctx); err != nil { // every publish confirmed
		log.Fatal(err)
	}

	f, err := c.NewFetcher(logs, "indexer", 10, 100*time.Millisecond, fibril.WithPrefetch(2))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close() // hands back what is prefetched but not returned
	var acks []*fibril.AckFuture
	for n := 0; n < 25; {
		batch, err := f.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range batch {
			_ = m.Data // index it
		}
		n += len(batch)
		fmt.Println("batch of", len(batch))
		acks = append(acks, c.AckAllAsync(batch...))
	}
	for _, a := range acks {
		if err := a.Wait(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// batch of 10
	// batch of 10
	// batch of 5
}

// Errors are typed by the code in SPEC.md's error table.
func ExampleError() {
	ctx := context.Background()
	c, err := fibril.Connect(ctx, serverURL)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	_, err = c.Publish(ctx, "orders.*", []byte("x"))
	fmt.Println(errors.Is(err, fibril.ErrWildcardNotAllowed))
	var fe *fibril.Error
	if errors.As(err, &fe) {
		fmt.Println(fe.Code, fe.Retriable())
	}
	// Output:
	// true
	// wildcard_not_allowed false
}

// Several servers: Connect tries them in order (here the first is down) and,
// once connected, moves to the next of the list when it loses its server.
// WithMsgID makes a publish resent after a failover stored once (in a
// cluster, within the topic's duplicate window).
func ExampleConnect_severalServers() {
	ctx := context.Background()
	c, err := fibril.Connect(ctx, "fibril://127.0.0.1:1,"+serverURL,
		fibril.WithServers("fibril://127.0.0.1:2"), // tried after the others
		fibril.WithoutDiscovery())                  // only these three
	if err != nil {
		log.Fatal(err) // wraps fibril.ErrNoServers, naming each address tried
	}
	defer c.Close()
	fmt.Println(len(c.Servers()), "servers; connected:", c.IsConnected())

	orders := exampleTopic("failover")
	if _, err := c.CreateTopic(ctx, orders, fibril.TopicConfig{Partitions: 1}); err != nil {
		log.Fatal(err)
	}
	pos, err := c.Publish(ctx, orders, []byte("order 43"), fibril.WithMsgID("order-43"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored at", pos)
	// Output:
	// 3 servers; connected: true
	// stored at 0:1
}
