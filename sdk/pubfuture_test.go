package fibril_test

// A confirmed PubFuture keeps no payload (issue 33, item 4), and its
// Result has a sentinel for "not yet" (item 5).

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

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
