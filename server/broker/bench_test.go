package broker

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/wire"
)

// BenchmarkQueue compares the lock-free ring with a buffered channel, in
// the same run: 4 producers push, one consumer drains in batches and parks
// when empty, as a partition actor does.
func BenchmarkQueue(b *testing.B) {
	impls := []struct {
		name string
		q    func() cmdQueue
	}{
		{"ring", func() cmdQueue { return newRing(8192) }},
		{"chan", func() cmdQueue { return newChanQueue(8192) }},
	}
	for _, impl := range impls {
		for _, producers := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/producers=%d", impl.name, producers), func(b *testing.B) {
				q, wk := impl.q(), newWaker()
				var got atomic.Int64
				done := make(chan struct{})
				total := int64(b.N)
				go func() {
					defer close(done)
					buf := make([]command, 0, 1024)
					for got.Load() < total {
						buf = q.drain(buf[:0], 1024)
						if len(buf) > 0 {
							got.Add(int64(len(buf)))
							continue
						}
						wk.sleeping.Store(true)
						if !q.empty() {
							wk.sleeping.Store(false)
							continue
						}
						<-wk.ch
						wk.sleeping.Store(false)
					}
				}()
				b.ResetTimer()
				var wg sync.WaitGroup
				per := b.N / producers
				for i := range producers {
					n := per
					if i == 0 {
						n += b.N % producers
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						c := command{kind: cmdPublish}
						for range n {
							for !q.push(&c) {
								runtime.Gosched()
							}
							wk.wake()
						}
					}()
				}
				wg.Wait()
				<-done
			})
		}
	}
}

// BenchmarkPublishConsume: in-process publish + push consume + ack of 1 KiB
// messages on the real file log with durability group and sync. Publishers use the
// async API with a window, the consumer a subscription that acks each
// delivery through Settle. One op is one message published, delivered and
// acked.
func BenchmarkPublishConsume(b *testing.B) {
	for _, c := range []struct {
		parts int
		dur   Durability
	}{{1, DurabilityGroup}, {4, DurabilityGroup}, {1, DurabilitySync}, {4, DurabilitySync}} {
		parts := c.parts
		b.Run(fmt.Sprintf("partitions=%d/durability=%s", parts, c.dur), func(b *testing.B) {
			br, err := Open(b.TempDir(), Options{Logf: func(string, ...any) {}})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			tp, err := br.CreateTopic("bench", TopicConfig{Partitions: parts, Durability: c.dur})
			if err != nil {
				b.Fatal(err)
			}
			g, err := tp.Group("g", GroupConfig{})
			if err != nil {
				b.Fatal(err)
			}
			var acked atomic.Int64
			allAcked := make(chan struct{})
			total := int64(b.N)
			var ackErr atomic.Value
			onAck := func(err error) {
				if err != nil {
					ackErr.Store(err)
				}
				if acked.Add(1) == total {
					close(allAcked)
				}
			}
			sub, err := g.Subscribe(1, 4096, func(d Delivery) {
				if err := br.Settle(d.Handle, Ack(), onAck); err != nil {
					ackErr.Store(err)
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Close()
			payload := make([]byte, 1024)
			window := make(chan struct{}, 8192)
			b.SetBytes(1024)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			producers := 4
			for i := range producers {
				n := b.N / producers
				if i == 0 {
					n += b.N % producers
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range n {
						window <- struct{}{}
						for {
							err := tp.PublishAsync(Message{Subject: "bench", Data: payload}, func(_ Position, err error) {
								if err != nil {
									ackErr.Store(err)
								}
								<-window
							})
							if err == nil {
								break
							}
							runtime.Gosched() // queue full: retry
						}
					}
				}()
			}
			wg.Wait()
			select {
			case <-allAcked:
			case <-time.After(60 * time.Second):
				b.Fatalf("only %d of %d acked", acked.Load(), total)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
			b.ReportMetric(float64(br.Stats().Syncs)/float64(b.N), "fsyncs/msg")
			if err, _ := ackErr.Load().(error); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestMemoryUnacked reports heap and RSS with 1M messages stored and leased
// (polled, never acked). Run with FIBRIL_MEM_TEST=1; it writes ~140 MB.
func TestMemoryUnacked(t *testing.T) {
	if os.Getenv("FIBRIL_MEM_TEST") == "" {
		t.Skip("set FIBRIL_MEM_TEST=1 to run")
	}
	const n = 1_000_000
	br, err := Open(t.TempDir(), Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	tp, _ := br.CreateTopic("mem", TopicConfig{})
	g, _ := tp.Group("g", GroupConfig{})
	payload := make([]byte, 100)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		for tp.PublishAsync(Message{Subject: "mem", Data: payload}, func(_ Position, err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		}) != nil {
			runtime.Gosched()
		}
	}
	wg.Wait()
	report := func(what string) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		st, _ := os.ReadFile("/proc/self/status")
		rss := ""
		for _, l := range strings.Split(string(st), "\n") {
			if strings.HasPrefix(l, "VmRSS") || strings.HasPrefix(l, "RssAnon") || strings.HasPrefix(l, "RssFile") {
				rss += strings.Join(strings.Fields(l), " ") + "; "
			}
		}
		t.Logf("%s: heap in use %.1f MiB; %s", what, float64(ms.HeapInuse)/(1<<20), rss)
	}
	report("1M stored, none delivered")
	ctx := context.Background()
	got := 0
	for got < n {
		ds, err := g.Poll(ctx, 10000)
		if err != nil {
			t.Fatal(err)
		}
		got += len(ds)
	}
	report("1M stored and leased (in flight, un-acked)")
}

// BenchmarkOrderedByKey is publish → push → ack through one partition for
// an unordered group and one ordered by key, 1 KiB messages spread over
// 1000 keys (Fibril-Key): the cost of reading each record's key at the
// group's head and of parking the ones whose key is out.
func BenchmarkOrderedByKey(b *testing.B) {
	for _, ord := range []wire.Ordering{wire.OrderNone, wire.OrderKey} {
		b.Run(fmt.Sprintf("ordered=%s", ord), func(b *testing.B) {
			br, err := Open(b.TempDir(), Options{Logf: func(string, ...any) {}})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			tp, err := br.CreateTopic("bench", TopicConfig{})
			if err != nil {
				b.Fatal(err)
			}
			g, err := tp.Group("g", GroupConfig{Ordered: ord})
			if err != nil {
				b.Fatal(err)
			}
			var acked atomic.Int64
			allAcked := make(chan struct{})
			var ackErr atomic.Value
			sub, err := g.Subscribe(1, 4096, func(d Delivery) {
				if err := br.Settle(d.Handle, Ack(), func(err error) {
					if err != nil {
						ackErr.Store(err)
					}
					if acked.Add(1) == int64(b.N) {
						close(allAcked)
					}
				}); err != nil {
					ackErr.Store(err)
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Close()
			hdrs := make([][]byte, 1000)
			for i := range hdrs {
				hdrs[i] = wire.AppendHeader(nil, wire.HeaderKey, fmt.Sprint("k", i))
			}
			payload := make([]byte, 1024)
			window := make(chan struct{}, 8192)
			b.SetBytes(1024)
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				window <- struct{}{}
				m := Message{Subject: "bench", Header: hdrs[i%len(hdrs)], Data: payload}
				for tp.PublishAsync(m, func(_ Position, err error) {
					if err != nil {
						ackErr.Store(err)
					}
					<-window
				}) != nil {
					runtime.Gosched() // queue full: retry
				}
			}
			select {
			case <-allAcked:
			case <-time.After(60 * time.Second):
				b.Fatalf("only %d of %d acked", acked.Load(), b.N)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
			if err, _ := ackErr.Load().(error); err != nil {
				b.Fatal(err)
			}
		})
	}
}
