package admin_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"

	"github.com/fibrilmq/fibril/server/admin"
	"github.com/fibrilmq/fibril/server/broker"
)

// Example wires the admin listener to an engine, as `fibril serve --http`
// does, and reads one metric.
func Example() {
	dir, err := os.MkdirTemp("", "fibril-admin-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	o := broker.DefaultOptions()
	o.SegmentSize = 1 << 20
	b, err := broker.Open(dir, o)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	t, err := b.CreateTopic("orders", broker.TopicConfig{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := t.Publish(context.Background(), broker.Message{Subject: "orders", Data: []byte("hi")}); err != nil {
		log.Fatal(err)
	}

	srv, err := admin.New(admin.Options{
		Addr:   "127.0.0.1:0",
		Broker: func() *broker.Broker { return b },
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()

	res, err := http.Get(srv.URL() + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "fibril_topic_published_total{") {
			fmt.Println(line)
		}
	}
	// Output: fibril_topic_published_total{topic="orders"} 1
}
