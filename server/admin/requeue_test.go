package admin

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/broker"
)

func post(t *testing.T, u, contentType, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

// deadLetter publishes msgs to tp and rejects every one through g.
func deadLetter(t *testing.T, tp *broker.Topic, g *broker.Group, msgs ...broker.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range msgs {
		if _, err := tp.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for n := 0; n < len(msgs); {
		ds, err := g.Poll(ctx, len(msgs)-n)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		for _, d := range ds {
			if err := d.Reject(ctx); err != nil {
				t.Fatal(err)
			}
		}
		n += len(ds)
	}
}

func requeueURL(s *Server, topic string) string {
	return s.URL() + "/api/topics/" + url.PathEscape(topic) + "/requeue"
}

func TestRequeueDeadLetters(t *testing.T) {
	b := openBroker(t)
	s := startAdmin(t, Options{Broker: staticBroker(b)})
	orders, err := b.CreateTopic("orders", broker.TopicConfig{Subjects: []string{"orders.>"}})
	if err != nil {
		t.Fatal(err)
	}
	billing, err := orders.Group("billing", broker.GroupConfig{MaxDeliveries: 1})
	if err != nil {
		t.Fatal(err)
	}
	hdr := protocol.AppendHeader(nil, "Trace", "abc")
	deadLetter(t, orders, billing,
		broker.Message{Subject: "orders.eu", Data: []byte("one")},
		broker.Message{Subject: "orders.us", Header: hdr, Data: []byte("two")},
		broker.Message{Subject: "orders.eu", Data: []byte("three")},
	)
	dlqName := broker.DeadLetterTopic("orders", "billing")
	dlq, ok := b.Topic(broker.TopicName(dlqName))
	if !ok {
		t.Fatal("no dead-letter topic")
	}
	waitFor(t, 5*time.Second, "three dead letters", func() bool { return topicStats(dlq).Published == 3 })

	for _, tc := range []struct {
		name, topic, ctype, body string
		want                     int
	}{
		{"form post refused", dlqName, "application/x-www-form-urlencoded", "max=1", http.StatusUnsupportedMediaType},
		{"not a dead-letter topic", "orders", "application/json", `{}`, http.StatusBadRequest},
		{"no such topic", "$DLQ.nope.g", "application/json", `{}`, http.StatusNotFound},
		{"bad max", dlqName, "application/json", `{"max":0}`, http.StatusBadRequest},
		{"bad json", dlqName, "application/json", `{"max":`, http.StatusBadRequest},
	} {
		if code, body := post(t, requeueURL(s, tc.topic), tc.ctype, tc.body); code != tc.want {
			t.Errorf("%s: status %d, want %d: %s", tc.name, code, tc.want, body)
		}
	}
	if code, _ := get(t, requeueURL(s, dlqName)); code != http.StatusMethodNotAllowed {
		t.Errorf("GET requeue: %d, want 405", code)
	}

	// Two at a time: max is honoured.
	var res RequeueResult
	code, body := post(t, requeueURL(s, dlqName), "application/json", `{"max":2}`)
	if code != 200 || json.Unmarshal(body, &res) != nil || res.Requeued != 2 || res.Skipped != 0 {
		t.Fatalf("requeue max 2: %d %s", code, body)
	}
	code, body = post(t, requeueURL(s, dlqName), "application/json; charset=utf-8", ``)
	if code != 200 || json.Unmarshal(body, &res) != nil || res.Requeued != 1 {
		t.Fatalf("requeue rest: %d %s", code, body)
	}
	code, body = post(t, requeueURL(s, dlqName), "application/json", `{}`)
	if code != 200 || json.Unmarshal(body, &res) != nil || res.Requeued != 0 {
		t.Fatalf("requeue of an empty dead-letter topic: %d %s", code, body)
	}
	waitFor(t, 5*time.Second, "the dead-letter topic to be settled", func() bool { return topicStats(dlq).Unsettled == 0 })

	// The messages are back in orders, with their subject, data and own
	// headers, without the dead-letter fields.
	if got := topicStats(orders).Published; got != 6 {
		t.Fatalf("orders published %d, want 6", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fresh, err := orders.Group("fresh", broker.GroupConfig{Start: broker.StartEarliest})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for len(seen) < 6 {
		ds, err := fresh.Poll(ctx, 10)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		for _, d := range ds {
			if d.Handle.Seq > 3 { // the requeued copies
				if _, ok := protocol.HeaderValue(d.Header, "Fibril-Reason"); ok {
					t.Errorf("requeued %q still has Fibril-Reason: %q", d.Data, d.Header)
				}
				tr, _ := protocol.HeaderValue(d.Header, "Trace")
				seen["requeued "+string(d.Data)] = d.Subject + " trace=" + string(tr)
			} else {
				seen["original "+string(d.Data)] = d.Subject
			}
			_ = d.Ack(ctx)
		}
	}
	for k, want := range map[string]string{
		"requeued one":   "orders.eu trace=",
		"requeued two":   "orders.us trace=abc",
		"requeued three": "orders.eu trace=",
	} {
		if seen[k] != want {
			t.Errorf("%s: %q, want %q (all: %v)", k, seen[k], want, seen)
		}
	}
}

func TestRequeueSkipsUnroutable(t *testing.T) {
	b := openBroker(t)
	s := startAdmin(t, Options{Broker: staticBroker(b)})
	gone, err := b.CreateTopic("gone", broker.TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gone.Group("g", broker.GroupConfig{MaxDeliveries: 1})
	if err != nil {
		t.Fatal(err)
	}
	deadLetter(t, gone, g, broker.Message{Subject: "gone", Data: []byte("x")})
	dlq, _ := b.Topic(broker.TopicName(broker.DeadLetterTopic("gone", "g")))
	waitFor(t, 5*time.Second, "the dead letter", func() bool { return topicStats(dlq).Published == 1 })
	if err := b.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	var res RequeueResult
	code, body := post(t, requeueURL(s, string(dlq.Name())), "application/json", `{}`)
	if code != 200 || json.Unmarshal(body, &res) != nil || res.Requeued != 0 || res.Skipped != 1 || res.Error == "" {
		t.Fatalf("requeue with no route: %d %s", code, body)
	}
	if got := topicStats(dlq).Unsettled; got != 1 {
		t.Errorf("skipped dead letter must stay: unsettled %d", got)
	}
}

// TestRequeueSelectedOverHTTP: the API takes TOPIC REQUEUE's selection
// (filter on the original subject, offset range) and refuses a bad one
// with 400.
func TestRequeueSelectedOverHTTP(t *testing.T) {
	b := openBroker(t)
	s := startAdmin(t, Options{Broker: staticBroker(b)})
	orders, err := b.CreateTopic("orders", broker.TopicConfig{Subjects: []string{"orders.>"}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := orders.Group("g", broker.GroupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	deadLetter(t, orders, g,
		broker.Message{Subject: "orders.eu", Data: []byte("one")},
		broker.Message{Subject: "orders.us", Data: []byte("two")})
	dlq := broker.DeadLetterTopic("orders", "g")
	var res RequeueResult
	code, body := post(t, requeueURL(s, dlq), "application/json", `{"max":10,"filter":["orders.us"]}`)
	if err := json.Unmarshal(body, &res); err != nil || code != 200 || res.Requeued != 1 {
		t.Fatalf("by filter: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := g.Poll(ctx, 10)
	if err != nil || len(ds) != 1 || string(ds[0].Data) != "two" {
		t.Fatalf("requeued: %v %v", ds, err)
	}
	if code, body := post(t, requeueURL(s, dlq), "application/json", `{"max":10,"from_seq":3,"to_seq":2}`); code != http.StatusBadRequest {
		t.Fatalf("bad range: %d %s", code, body)
	}
}
