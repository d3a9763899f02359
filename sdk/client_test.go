package fibril_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

func TestPublishFetchAck(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := topicName(t)
	if _, err := c.CreateTopic(ctx, topic, fibril.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateGroup(ctx, topic, "g", fibril.GroupConfig{}); err != nil {
		t.Fatal(err)
	}
	pos, err := c.Publish(ctx, topic, []byte("hello"), fibril.WithHeader("X-A", "1"), fibril.WithMsgID("m-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !pos.Stored || pos.Partition != 0 || pos.Seq != 1 {
		t.Fatalf("position %+v, want stored 0:1", pos)
	}
	msgs, err := c.Fetch(ctx, topic, "g", 10, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Fatalf("got %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if string(m.Data) != "hello" || m.Subject != topic || m.DeliveryCount() != 1 || m.Seq() != 1 {
		t.Fatalf("got %q on %q, delivery %d seq %d", m.Data, m.Subject, m.DeliveryCount(), m.Seq())
	}
	if m.Header.Get("X-A") != "1" || m.Header.Get(fibril.HeaderMsgID) != "m-1" {
		t.Fatalf("headers %v", m.Header)
	}
	if err := m.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Ack(ctx); err != nil {
		t.Fatalf("second ack: %v (acks are idempotent)", err)
	}
	msgs, err = c.Fetch(ctx, topic, "g", 10, 0)
	if err != nil || len(msgs) != 0 {
		t.Fatalf("after ack: %d messages, %v", len(msgs), err)
	}
}

func TestPublishNotStored(t *testing.T) {
	c := connect(t, "")
	pos, err := c.Publish(testCtx(t), "_INBOX."+topicName(t), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if pos.Stored || pos.String() != "-" {
		t.Fatalf("position %+v, want not stored", pos)
	}
}

func TestPublishAsyncManyAndBatch(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "", fibril.WithMaxUnconfirmed(64))
	topic := topicName(t)
	if _, err := c.CreateGroup(ctx, mustTopic(t, c, topic, fibril.TopicConfig{}), "g", fibril.GroupConfig{}); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	futs := make([]*fibril.PubFuture, n)
	for i := range futs {
		f, err := c.PublishAsync(ctx, topic, []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		futs[i] = f
	}
	for i, f := range futs {
		p, err := f.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p.Seq != uint64(i+1) { // one partition, one connection: confirms in order
			t.Fatalf("publish %d stored at %v", i, p)
		}
	}
	batch := []fibril.OutMsg{{Subject: topic, Data: []byte("b0")}, {Subject: topic, Data: []byte("b1"), Key: "k"}}
	pos, err := c.PublishBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if pos[0].Seq != n+1 || pos[1].Seq != n+2 {
		t.Fatalf("batch positions %v", pos)
	}
	got := 0
	for got < n+2 {
		msgs, err := c.Fetch(ctx, topic, "g", 1000, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			t.Fatalf("got %d of %d", got, n+2)
		}
		for _, m := range msgs {
			if want := fmt.Sprint(got); got < n && string(m.Data) != want {
				t.Fatalf("message %d is %q", got, m.Data)
			}
			got++
		}
		if err := c.AckAll(ctx, msgs[:min(len(msgs), 40)]...); err != nil {
			t.Fatal(err)
		}
	}
}

func mustTopic(t *testing.T, c *fibril.Conn, name string, cfg fibril.TopicConfig) string {
	t.Helper()
	if _, err := c.CreateTopic(testCtx(t), name, cfg); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestServerErrorsAreTyped(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"invalid subject", pubErr(c, ctx, "a..b"), fibril.ErrInvalidSubject},
		{"wildcard", pubErr(c, ctx, "a.*"), fibril.ErrWildcardNotAllowed},
		{"reserved", pubErr(c, ctx, "$SYS.x"), fibril.ErrReservedSubject},
		{"unknown topic", fetchErr(c, ctx, "nope."+topicName(t), "g"), fibril.ErrUnknownTopic},
		{"bad group name", fetchErr(c, ctx, mustTopic(t, c, topicName(t), fibril.TopicConfig{}), "bad!"), fibril.ErrInvalidName},
		{"unknown handle", c.SettleHandle(ctx, "$F.999999999.999999999.0.1.1", fibril.OpAck, 0), fibril.ErrUnknownHandle},
		{"malformed handle", c.SettleHandle(ctx, "$F.1.2", fibril.OpAck, 0), fibril.ErrInvalidHandle},
		{"too large", pubSizeErr(c, ctx, int(c.Info().MaxPayload)+1), fibril.ErrMaxPayload},
		{"bad config", func() error {
			_, err := c.CreateTopic(ctx, topicName(t), fibril.TopicConfig{Durability: "sometimes"})
			return err
		}(), fibril.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.want) {
				t.Fatalf("err = %v, want %v", tt.err, tt.want)
			}
			var fe *fibril.Error
			if !errors.As(tt.err, &fe) {
				t.Fatalf("err %v: not a *fibril.Error", tt.err)
			}
		})
	}
	// the connection survived every refusal
	if _, err := c.Publish(ctx, "_INBOX.after", nil); err != nil {
		t.Fatal(err)
	}
}

func pubErr(c *fibril.Conn, ctx context.Context, subj string) error {
	_, err := c.Publish(ctx, subj, []byte("x"))
	return err
}

func pubSizeErr(c *fibril.Conn, ctx context.Context, n int) error {
	_, err := c.Publish(ctx, "_INBOX.big", make([]byte, n))
	return err
}

func fetchErr(c *fibril.Conn, ctx context.Context, topic, group string) error {
	_, err := c.Fetch(ctx, topic, group, 1, 0)
	return err
}

func TestNackRedeliveryAndStaleHandle(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	if _, err := c.CreateGroup(ctx, topic, "g", fibril.GroupConfig{LeaseMs: 200}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, topic, []byte("x")); err != nil {
		t.Fatal(err)
	}
	first := fetchOne(t, c, topic, "g", 0)
	second := fetchOne(t, c, topic, "g", 5*time.Second) // after the lease expired
	if second.DeliveryCount() != 2 {
		t.Fatalf("redelivery count %d", second.DeliveryCount())
	}
	if err := first.Ack(ctx); !errors.Is(err, fibril.ErrStaleHandle) {
		t.Fatalf("ack of superseded delivery: %v, want ErrStaleHandle", err)
	}
	start := time.Now()
	if err := second.Nack(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	third := fetchOne(t, c, topic, "g", 5*time.Second)
	if el := time.Since(start); el < 200*time.Millisecond || third.DeliveryCount() != 3 {
		t.Fatalf("after nack with delay: delivery %d after %v", third.DeliveryCount(), el)
	}
	if err := third.Reject(ctx); err != nil {
		t.Fatal(err)
	}
	dl := fetchOne(t, c, "$DLQ."+topic+".g", "ops", 5*time.Second)
	if dl.Header.Get(fibril.HeaderReason) != "rejected" || string(dl.Data) != "x" {
		t.Fatalf("dead letter %q %v", dl.Data, dl.Header)
	}
}

func fetchOne(t *testing.T, c *fibril.Conn, topic, group string, wait time.Duration) *fibril.Msg {
	t.Helper()
	msgs, err := c.Fetch(testCtx(t), topic, group, 1, wait)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Fatalf("fetch %s/%s: %d messages, want 1", topic, group, len(msgs))
	}
	return msgs[0]
}

func TestConsumeConcurrency(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	if _, err := c.CreateGroup(ctx, topic, "g", fibril.GroupConfig{}); err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		if _, err := c.PublishAsync(ctx, topic, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	seen := map[string]int{}
	var running, peak atomic.Int32
	failOnce := map[string]bool{}
	done := make(chan error, 1)
	go func() {
		done <- c.Consume(cctx, topic, "g", func(ctx context.Context, m *fibril.Msg) error {
			r := running.Add(1)
			defer running.Add(-1)
			for p := peak.Load(); r > p && !peak.CompareAndSwap(p, r); p = peak.Load() {
			}
			time.Sleep(2 * time.Millisecond) // some work, so handlers overlap
			mu.Lock()
			defer mu.Unlock()
			k := string(m.Data)
			if k == "7" && !failOnce[k] { // an error nacks: it comes back
				failOnce[k] = true
				return errors.New("try again")
			}
			seen[k]++
			if len(seen) == n {
				cancel()
			}
			return nil
		}, fibril.WithConcurrency(4), fibril.WithMaxInFlight(16))
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("consumed %d of %d", len(seen), n)
	}
	for k, v := range seen {
		if v != 1 {
			t.Fatalf("%s handled %d times", k, v)
		}
	}
	if peak.Load() < 2 || peak.Load() > 4 {
		t.Fatalf("peak concurrency %d, want 2..4", peak.Load())
	}
	if msgs, err := c.Fetch(ctx, topic, "g", 10, 300*time.Millisecond); err != nil || len(msgs) != 0 {
		t.Fatalf("after Consume acked everything: %d left, %v", len(msgs), err)
	}
}

func TestMessagesIteratorBreakHandsBack(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	if _, err := c.CreateGroup(ctx, topic, "g", fibril.GroupConfig{LeaseMs: 60000}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := c.Publish(ctx, topic, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for m, err := range c.Messages(ctx, topic, "g", fibril.WithMaxInFlight(5)) {
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		if got++; got == 2 {
			break
		}
	}
	// the 3 pushed but not yielded are nacked on break: ready again at once
	// although the lease is a minute
	var left []*fibril.Msg
	waitFor(t, 5*time.Second, "3 messages handed back", func() bool {
		msgs, err := c.Fetch(ctx, topic, "g", 10, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, msgs...)
		return len(left) >= 3
	})
	if len(left) != 3 {
		t.Fatalf("%d handed back, want 3", len(left))
	}
}

func TestFetchCancelHandsBack(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	if _, err := c.CreateGroup(ctx, topic, "g", fibril.GroupConfig{LeaseMs: 60000}); err != nil {
		t.Fatal(err)
	}
	// a long poll on c that gives up before the message arrives
	fctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := c.Fetch(fctx, topic, "g", 1, 2*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Fetch: %v, want deadline exceeded", err)
	}
	p := connect(t, "")
	if _, err := p.Publish(ctx, topic, []byte("late")); err != nil {
		t.Fatal(err)
	}
	// the abandoned POLL received it; c hands it back, so another consumer
	// gets it now (attempt 2), not after the 60 s lease
	other := connect(t, "")
	m := fetchOne(t, other, topic, "g", 5*time.Second)
	if string(m.Data) != "late" || m.DeliveryCount() != 2 {
		t.Fatalf("got %q delivery %d", m.Data, m.DeliveryCount())
	}
}

func TestConcurrentPublishersAndClose(t *testing.T) {
	ctx := testCtx(t)
	before := runtime.NumGoroutine()
	c, err := fibril.Connect(ctx, serverURL, fibril.WithHeartbeat(time.Second, 3))
	if err != nil {
		t.Fatal(err)
	}
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{Partitions: 3})
	var wg sync.WaitGroup
	var stored atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				p, err := c.Publish(ctx, topic, []byte(fmt.Sprint(g, i)), fibril.WithKey(fmt.Sprint(g)))
				if err != nil {
					t.Error(err)
					return
				}
				if p.Stored {
					stored.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if stored.Load() != 400 {
		t.Fatalf("stored %d of 400", stored.Load())
	}
	seen := map[string]bool{}
	for len(seen) < 400 {
		msgs, err := c.Fetch(ctx, topic, "g", 400, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			t.Fatalf("fetched %d of 400 confirmed messages", len(seen))
		}
		for _, m := range msgs {
			seen[string(m.Data)] = true
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, topic, []byte("x")); !errors.Is(err, fibril.ErrClosed) {
		t.Fatalf("publish after Close: %v", err)
	}
	waitFor(t, 5*time.Second, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= before })
}

func TestManagement(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := topicName(t)
	ti, err := c.CreateTopic(ctx, topic, fibril.TopicConfig{Partitions: 2, Durability: "sync"})
	if err != nil {
		t.Fatal(err)
	}
	if ti.Name != topic || ti.Config.Partitions != 2 || ti.Config.Durability != "sync" || ti.Config.Retention != "workqueue" {
		t.Fatalf("topic info %+v", ti)
	}
	gi, err := c.CreateGroup(ctx, topic, "g", fibril.GroupConfig{MaxDeliveries: 3})
	if err != nil {
		t.Fatal(err)
	}
	if gi.Config.MaxDeliveries != 3 || gi.Config.DeadLetter != "$DLQ."+topic+".g" {
		t.Fatalf("group info %+v", gi)
	}
	names, err := c.Topics(ctx)
	if err != nil || !contains(names, topic) {
		t.Fatalf("topics %v, %v", names, err)
	}
	groups, err := c.Groups(ctx, topic)
	if err != nil || !contains(groups, "g") {
		t.Fatalf("groups %v, %v", groups, err)
	}
	if err := c.DeleteGroup(ctx, topic, "g"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Group(ctx, topic, "g"); !errors.Is(err, fibril.ErrUnknownGroup) {
		t.Fatalf("deleted group: %v", err)
	}
	if err := c.DeleteTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Topic(ctx, topic); !errors.Is(err, fibril.ErrUnknownTopic) {
		t.Fatalf("deleted topic: %v", err)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestLargePayloadRoundTrip(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	data := bytes.Repeat([]byte("0123456789abcdef"), int(c.Info().MaxPayload)/16)
	if _, err := c.Publish(ctx, topic, data); err != nil {
		t.Fatal(err)
	}
	m := fetchOne(t, c, topic, "g", time.Second)
	if !bytes.Equal(m.Data, data) {
		t.Fatalf("payload of %d bytes came back as %d bytes", len(data), len(m.Data))
	}
}

func TestConsumeAutoExtend(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	if _, err := c.CreateGroup(ctx, topic, "g", fibril.GroupConfig{LeaseMs: 300}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, topic, []byte("long job")); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	started := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	var deliveries atomic.Int32
	go func() {
		done <- c.Consume(cctx, topic, "g", func(ctx context.Context, m *fibril.Msg) error {
			deliveries.Add(1)
			close(started)
			<-release // the job runs until the test says so
			cancel()
			return nil
		}, fibril.WithAutoExtend(80*time.Millisecond))
	}()
	<-started
	// three leases long, nobody else gets the message: it stays leased
	other := connect(t, "")
	if msgs, err := other.Fetch(ctx, topic, "g", 1, 900*time.Millisecond); err != nil || len(msgs) != 0 {
		t.Fatalf("while the job runs another consumer got %d messages, %v", len(msgs), err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if deliveries.Load() != 1 {
		t.Fatalf("%d deliveries, want 1", deliveries.Load())
	}
	if msgs, err := other.Fetch(ctx, topic, "g", 1, 500*time.Millisecond); err != nil || len(msgs) != 0 {
		t.Fatalf("after the ack: %d messages, %v", len(msgs), err)
	}
}
