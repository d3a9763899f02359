package fibril_test

// A confirmed PubFuture keeps no payload (issue 33, item 4), and its
// Result has a sentinel for "not yet" (item 5).

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

// TestConfirmedPubFutureReleasesFrame: the futures of 2,000 confirmed 4 KiB
// publishes hold none of their encoded frames (they used to keep every one
// until the future itself was dropped).
func TestConfirmedPubFutureReleasesFrame(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{Partitions: 1})
	data := bytes.Repeat([]byte("x"), 4096)
	futs := make([]*fibril.PubFuture, 2000)
	for i := range futs {
		f, err := c.PublishAsync(ctx, topic, data)
		if err != nil {
			t.Fatal(err)
		}
		futs[i] = f
	}
	retained := 0
	for _, f := range futs {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		retained += f.RetainedBytes()
	}
	if retained != 0 {
		t.Fatalf("2000 confirmed futures retain %d bytes of frames", retained)
	}
}

// TestPubFutureResultPending: Result before the confirm is ErrPublishPending.
func TestPubFutureResultPending(t *testing.T) {
	ctx := testCtx(t)
	addr, freeze := freezingProxy(t, serverURL[len("fibril://"):])
	c := connect(t, "fibril://"+addr)
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	freeze() // no confirm can arrive
	f, err := c.PublishAsync(ctx, topic, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Result(); !errors.Is(err, fibril.ErrPublishPending) {
		t.Fatalf("Result before the confirm = %v, want ErrPublishPending", err)
	}
}

// BenchmarkRetainedPubFutures reports the live heap per confirmed 1 KiB
// publish whose future is kept (heap-B/future): about the size of the
// future and its answer, not of the payload.
func BenchmarkRetainedPubFutures(b *testing.B) {
	c, topic := benchConn(b)
	ctx := b.Context()
	data := bytes.Repeat([]byte("x"), 1024)
	futs := make([]*fibril.PubFuture, 0, b.N)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		f, err := c.PublishAsync(ctx, topic, data)
		if err != nil {
			b.Fatal(err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		if _, err := f.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "heap-B/future")
	runtime.KeepAlive(futs)
}

// TestPublishAsyncAllocs: a plain PublishAsync, awaited, costs three
// allocations once the frame pool is warm: its future, its done channel and,
// one request at a time, a new array for the answer fifo (which slides
// forward). It used to cost seven: the request and the future apart, the
// encoded frame, the publish options and the confirm's text as well.
func TestPublishAsyncAllocs(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{Partitions: 1})
	data := bytes.Repeat([]byte("x"), 1024)
	publish := func() {
		f, err := c.PublishAsync(ctx, topic, data)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		publish() // warm: the pool, the writer's buffers
	}
	// the read and write loops run in between and count too
	if n := testing.AllocsPerRun(100, publish); n > 3 {
		t.Fatalf("%.1f allocations per publish, want at most 3", n)
	}
}

// TestPublishReusedFramesIntact: publishes of changing sizes, encoded into
// frames recycled from earlier confirms, all arrive as sent.
func TestPublishReusedFramesIntact(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{Partitions: 1})
	if _, err := c.CreateGroup(ctx, topic, "g", fibril.GroupConfig{}); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	body := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 1+(i*37)%3000) }
	for round := 0; round < n; round += 500 {
		futs := make([]*fibril.PubFuture, 0, 500)
		for i := round; i < round+500; i++ {
			f, err := c.PublishAsync(ctx, topic, body(i))
			if err != nil {
				t.Fatal(err)
			}
			futs = append(futs, f)
		}
		for _, f := range futs {
			if _, err := f.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := 0
	for got < n {
		msgs, err := c.Fetch(ctx, topic, "g", 500, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			t.Fatalf("only %d of %d messages arrived", got, n)
		}
		for _, m := range msgs {
			if want := body(got); !bytes.Equal(m.Data, want) {
				t.Fatalf("message %d: %d bytes of %q, want %d of %q", got, len(m.Data), m.Data[:1], len(want), want[:1])
			}
			got++
		}
		if err := c.AckAll(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPipelinedPublishAllocs: futures that are first looked at after their
// confirm came cost one allocation each (the future); the done channel is
// made only for a future waited on while pending (it used to be made for
// every publish).
func TestPipelinedPublishAllocs(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, "")
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{Partitions: 1})
	data := bytes.Repeat([]byte("x"), 1024)
	const batch = 200 // within the window: PublishAsync never waits
	futs := make([]*fibril.PubFuture, batch)
	burst := func() {
		for i := range futs {
			f, err := c.PublishAsync(ctx, topic, data)
			if err != nil {
				t.Fatal(err)
			}
			futs[i] = f
		}
		if err := c.Flush(ctx); err != nil { // every confirm is in
			t.Fatal(err)
		}
		for _, f := range futs {
			if _, err := f.Result(); err != nil {
				t.Fatal(err)
			}
		}
	}
	burst() // warm: the frame pool, the buffers
	// per burst: one future per publish, and the flush's PING request and
	// fifo; the read and write loops count too
	if n := testing.AllocsPerRun(10, burst); n > batch*3/2 {
		t.Fatalf("%.0f allocations per %d publishes, want at most %d", n, batch, batch*3/2)
	}
}
