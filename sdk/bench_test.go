package fibril_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

func benchConn(b *testing.B) (*fibril.Conn, string) {
	b.Helper()
	ctx := context.Background()
	c, err := fibril.Connect(ctx, serverURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	topic := fmt.Sprintf("bench.%s.%d", b.Name(), time.Now().UnixNano())
	if _, err := c.CreateTopic(ctx, topic, fibril.TopicConfig{}); err != nil {
		b.Fatal(err)
	}
	if _, err := c.CreateGroup(ctx, topic, "g", fibril.GroupConfig{}); err != nil {
		b.Fatal(err)
	}
	return c, topic
}

// BenchmarkPublishSync: one publish at a time, each waiting for its confirm
// (a group-committed fsync on the server).
func BenchmarkPublishSync(b *testing.B) {
	c, topic := benchConn(b)
	data := make([]byte, 1024)
	ctx := context.Background()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Publish(ctx, topic, data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublishAsync: pipelined publishes (up to the server's window in
// flight), 1 KiB each; the time includes every confirm.
func BenchmarkPublishAsync(b *testing.B) {
	c, topic := benchConn(b)
	data := make([]byte, 1024)
	ctx := context.Background()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var last *fibril.PubFuture
	for b.Loop() {
		f, err := c.PublishAsync(ctx, topic, data)
		if err != nil {
			b.Fatal(err)
		}
		last = f
	}
	if _, err := last.Wait(ctx); err != nil {
		b.Fatal(err)
	}
}

// backlog publishes n messages of 1 KiB and waits for their confirms.
func backlog(b *testing.B, c *fibril.Conn, topic string, n int) []byte {
	b.Helper()
	ctx := context.Background()
	data := make([]byte, 1024)
	for range n {
		if _, err := c.PublishAsync(ctx, topic, data); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkFetchAck: pull 100 at a time and ack them with one ACK, each a
// round trip (the simple loop).
func BenchmarkFetchAck(b *testing.B) {
	c, topic := benchConn(b)
	ctx := context.Background()
	data := backlog(b, c, topic, b.N)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for got := 0; got < b.N; {
		msgs, err := c.Fetch(ctx, topic, "g", 100, time.Second)
		if err != nil || len(msgs) == 0 {
			b.Fatalf("fetch after %d: %v", got, err)
		}
		if err := c.AckAll(ctx, msgs...); err != nil {
			b.Fatal(err)
		}
		got += len(msgs)
	}
}

// BenchmarkConsume: the fast pull loop of a backlog, one op per message of
// 1 KiB: a Fetcher (batches of 500, two POLLs prefetched) and one
// AckAllAsync per batch; the time includes every ack's answer.
func BenchmarkConsume(b *testing.B) {
	c, topic := benchConn(b)
	ctx := context.Background()
	data := backlog(b, c, topic, b.N)
	// wait 0: at the end of the backlog, POLLs parked on the drained topic
	// would hold back the last acks' answers for their wait
	f, err := c.NewFetcher(topic, "g", 500, 0, fibril.WithPrefetch(2))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	acks := make([]*fibril.AckFuture, 0, b.N/500+1)
	for got := 0; got < b.N; {
		msgs, err := f.Next(ctx)
		if err != nil || len(msgs) == 0 {
			b.Fatalf("next after %d: %v", got, err)
		}
		acks = append(acks, c.AckAllAsync(msgs...))
		got += len(msgs)
	}
	for _, a := range acks {
		if err := a.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConsumePush: Consume (push, max in flight 1000, one handler)
// over a backlog, one op per message of 1 KiB; Consume acks each message
// (pipelined) and returns once every ack is answered.
func BenchmarkConsumePush(b *testing.B) {
	c, topic := benchConn(b)
	data := backlog(b, c, topic, b.N)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	err := c.Consume(ctx, topic, "g", func(context.Context, *fibril.Msg) error {
		if n++; n == b.N {
			cancel()
		}
		return nil
	}, fibril.WithMaxInFlight(1000), fibril.WithErrorHandler(func(err error) { b.Error(err) }))
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if n != b.N {
		b.Fatalf("handled %d of %d", n, b.N)
	}
}

// BenchmarkMessagesAckAsync: the iterator over a backlog, each message
// acknowledged with AckAsync (one ACK per message, not waited for).
func BenchmarkMessagesAckAsync(b *testing.B) {
	c, topic := benchConn(b)
	data := backlog(b, c, topic, b.N)
	ctx := context.Background()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	var last *fibril.AckFuture
	for m, err := range c.Messages(ctx, topic, "g", fibril.WithMaxInFlight(1000)) {
		if err != nil {
			b.Fatal(err)
		}
		last = m.AckAsync()
		if n++; n == b.N {
			break
		}
	}
	if err := last.Wait(ctx); err != nil { // answers come in order
		b.Fatal(err)
	}
}
