package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestDeadLetterMaxDeliveries(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("jobs", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{MaxDeliveries: 2})
	hdr := "NATS/1.0\r\nTrace: 7\r\n\r\n"
	if _, err := tp.Publish(context.Background(), Message{Subject: "jobs", Header: []byte(hdr), Data: []byte("poison")}); err != nil {
		t.Fatal(err)
	}
	for attempt := uint32(1); attempt <= 2; attempt++ {
		d := e.poll(g, 1)[0]
		if d.Attempt != attempt {
			t.Fatalf("attempt %d, want %d", d.Attempt, attempt)
		}
		if err := e.settle(d, Nack(0)); err != nil {
			t.Fatal(err)
		}
	}
	dlt, ok := e.b.Topic("$DLQ.jobs.w")
	if !ok {
		t.Fatal("no dead-letter topic")
	}
	dg := e.group(dlt, "inspect", GroupConfig{})
	d := e.poll(dg, 1)[0]
	if string(d.Data) != "poison" {
		t.Fatalf("dead letter data %q", d.Data)
	}
	h := string(d.Header)
	for _, want := range []string{"NATS/1.0\r\n", "Trace: 7\r\n", "Fibril-Reason: max_deliveries\r\n", "Fibril-Subject: jobs\r\n",
		"Fibril-Partition: 0\r\n", "Fibril-Seq: 1\r\n", "Fibril-Deliveries: 2\r\n"} {
		if !strings.Contains(h, want) {
			t.Fatalf("header %q lacks %q", h, want)
		}
	}
	if !strings.HasSuffix(h, "\r\n\r\n") || strings.Count(h, "\r\n\r\n") != 1 {
		t.Fatalf("header block not terminated once: %q", h)
	}
	// the source group has settled it: nothing left, pending 0
	waitFor(t, "source settled", func() bool { return g.Info().Pending == 0 })
	if got := e.pollNow(g, 1, 0); len(got) != 0 {
		t.Fatalf("dead-lettered message redelivered: %v", datas(got))
	}
}

func TestDeadLetterReject(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("jobs", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{})
	e.publish(tp, "bad")
	e.publish(tp, "good")
	d := e.poll(g, 1)[0]
	if err := e.settle(d, Reject()); err != nil {
		t.Fatal(err)
	}
	if err := e.settle(d, Ack()); err != nil {
		t.Fatalf("ack after reject should be a no-op: %v", err)
	}
	dlt, _ := e.b.Topic("$DLQ.jobs.w")
	dd := e.poll(e.group(dlt, "x", GroupConfig{}), 1)[0]
	if !strings.Contains(string(dd.Header), "Fibril-Reason: rejected\r\n") || string(dd.Data) != "bad" {
		t.Fatalf("dead letter %q %q", dd.Header, dd.Data)
	}
	if got := datas(e.poll(g, 5)); len(got) != 1 || got[0] != "good" {
		t.Fatalf("after reject: %v", got)
	}
}

// A dead letter larger than 4 MiB was dropped (logged, not stored) because
// dead-letter topics had smaller segments than the topics they serve.
func TestDeadLetterOfLargeMessageIsNotDropped(t *testing.T) {
	b, err := Open(t.TempDir(), Options{Logf: t.Logf, SegmentSize: 8 << 20, EventSegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	tp, err := b.CreateTopic("big", TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := tp.Group("w", GroupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	payload := strings.Repeat("x", 5<<20)
	if _, err := tp.Publish(ctx, Message{Subject: "big", Data: []byte(payload)}); err != nil {
		t.Fatal(err)
	}
	ds, err := g.Poll(ctx, 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("poll: %d deliveries, %v", len(ds), err)
	}
	if err := ds[0].Reject(ctx); err != nil {
		t.Fatal(err)
	}
	dlt, ok := b.Topic("$DLQ.big.w")
	if !ok {
		t.Fatal("no dead-letter topic")
	}
	dg, err := dlt.Group("x", GroupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	dd, err := dg.Poll(pctx, 1)
	if err != nil || len(dd) != 1 || string(dd[0].Data) != payload {
		t.Fatalf("dead letter of %d bytes not stored: %d deliveries, %v", len(payload), len(dd), err)
	}
}

func TestDeadLetterNone(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("jobs", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{MaxDeliveries: 1, DeadLetter: "-"})
	e.publish(tp, "x")
	if err := e.settle(e.poll(g, 1)[0], Nack(0)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "dropped", func() bool { return g.Info().Pending == 0 })
	if _, ok := e.b.Topic("$DLQ.jobs.w"); ok {
		t.Fatal("dead-letter topic created for dead_letter '-'")
	}
}

func TestDeadLetterSurvivesRestart(t *testing.T) {
	// Delivery counts are persisted: a message nacked once before a restart
	// and once after reaches the dead-letter topic with max_deliveries 2.
	e := newEnv(t, nil)
	tp := e.topic("jobs", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{MaxDeliveries: 2})
	e.publish(tp, "p")
	e.poll(g, 1) // delivered once, never settled
	e.restart()
	tp, _ = e.b.Topic("jobs")
	g, _ = tp.FindGroup("w")
	d := e.poll(g, 1)[0]
	if d.Attempt != 2 {
		t.Fatalf("attempt after restart %d, want 2", d.Attempt)
	}
	if err := e.settle(d, Nack(0)); err != nil {
		t.Fatal(err)
	}
	dlt, _ := e.b.Topic("$DLQ.jobs.w")
	dd := e.poll(e.group(dlt, "x", GroupConfig{}), 1)[0]
	if !strings.Contains(string(dd.Header), "Fibril-Deliveries: 2\r\n") {
		t.Fatalf("header %q", dd.Header)
	}
}

func TestDLQHeaderTable(t *testing.T) {
	tests := []struct {
		orig, want string
	}{
		{"", "NATS/1.0\r\nFibril-Reason: rejected\r\nFibril-Subject: s\r\nFibril-Partition: 1\r\nFibril-Seq: 2\r\nFibril-Deliveries: 3\r\n\r\n"},
		{"NATS/1.0\r\nA: b\r\n\r\n", "NATS/1.0\r\nA: b\r\nFibril-Reason: rejected\r\nFibril-Subject: s\r\nFibril-Partition: 1\r\nFibril-Seq: 2\r\nFibril-Deliveries: 3\r\n\r\n"},
		{"NATS/1.0 503\r\n\r\n", "NATS/1.0 503\r\nFibril-Reason: rejected\r\nFibril-Subject: s\r\nFibril-Partition: 1\r\nFibril-Seq: 2\r\nFibril-Deliveries: 3\r\n\r\n"},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := string(dlqHeader([]byte(tt.orig), "rejected", "", "s", 1, 2, 3)); got != tt.want {
				t.Fatalf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestDeadLetterTopicTakesSourceSettings: the dead-letter topic a group
// creates has its source topic's durability and compression (it used to
// be left uncompressed).
func TestDeadLetterTopicTakesSourceSettings(t *testing.T) {
	for _, c := range []struct {
		d   Durability
		cmp Compression
	}{{DurabilityGroup, CompressionZstd}, {DurabilitySync, CompressionS2}, {DurabilityNone, CompressionNone}} {
		t.Run(fmt.Sprint(c.d, "/", c.cmp), func(t *testing.T) {
			e := newEnv(t, nil)
			tp := e.topic("jobs", TopicConfig{Durability: c.d, Compression: c.cmp})
			e.group(tp, "w", GroupConfig{})
			dlt, ok := e.b.Topic("$DLQ.jobs.w")
			if !ok {
				t.Fatal("no dead-letter topic")
			}
			if got := dlt.Config(); got.Durability != c.d || got.Compression != c.cmp {
				t.Fatalf("dead-letter topic durability %q compression %q, want %q %q", got.Durability, got.Compression, c.d, c.cmp)
			}
		})
	}
}
