package admin

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/fibrilmq/fibril/server/broker"
)

// BenchmarkScrape measures one /metrics and one /api/topics request over
// real HTTP with 50 topics of 2 partitions and 2 groups each.
func BenchmarkScrape(b *testing.B) {
	o := broker.DefaultOptions()
	o.SegmentSize = 1 << 20
	o.EventSegmentSize = 1 << 20
	br, err := broker.Open(b.TempDir(), o)
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	for i := range 50 {
		tp, err := br.CreateTopic(broker.TopicName(fmt.Sprintf("topic%02d", i)), broker.TopicConfig{Partitions: 2})
		if err != nil {
			b.Fatal(err)
		}
		for _, g := range []broker.GroupName{"a", "b"} {
			if _, err := tp.Group(g, broker.GroupConfig{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	s, err := New(Options{Addr: "127.0.0.1:0", Broker: func() *broker.Broker { return br }})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	for _, path := range []string{"/metrics", "/api/topics"} {
		b.Run(path, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := http.Get(s.URL() + path)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					b.Fatalf("status %d", res.StatusCode)
				}
				b.SetBytes(n)
			}
		})
	}
}
