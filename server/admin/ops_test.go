package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/broker"
)

func TestPauseResumeAndPurge(t *testing.T) {
	b := openBroker(t)
	s := startAdmin(t, Options{Broker: staticBroker(b), Authenticate: TokenAuth("sekrit")})
	tp, err := b.CreateTopic("jobs", broker.TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := tp.Group("w", broker.GroupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, tp, 3)
	base := s.URL() + "/api/topics/jobs"
	postAuth := func(path, ct string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer sekrit")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, body
	}
	// Guards: no auth, wrong content type, unknown group.
	if code, _ := post(t, base+"/groups/w/pause", "application/json", "{}"); code != http.StatusUnauthorized {
		t.Fatalf("pause without auth: %d", code)
	}
	if code, _ := postAuth("/groups/w/pause", "text/plain"); code != http.StatusUnsupportedMediaType {
		t.Fatalf("pause as a form: %d", code)
	}
	if code, _ := postAuth("/groups/nope/pause", "application/json"); code != http.StatusNotFound {
		t.Fatalf("pause unknown group: %d", code)
	}

	code, body := postAuth("/groups/w/pause", "application/json")
	var gs GroupStats
	if code != 200 || json.Unmarshal(body, &gs) != nil || !gs.Paused || !g.Paused() {
		t.Fatalf("pause: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A paused group delivers nothing: a poll runs into its deadline.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	ds, err := g.Poll(short, 3)
	cancelShort()
	if len(ds) != 0 || err == nil {
		t.Fatalf("paused group delivered %d (%v)", len(ds), err)
	}
	if code, body = postAuth("/groups/w/resume", "application/json"); code != 200 || g.Paused() {
		t.Fatalf("resume: %d %s", code, body)
	}
	if ds, err := g.Poll(ctx, 3); err != nil || len(ds) != 3 {
		t.Fatalf("resumed group delivered %d (%v)", len(ds), err)
	}

	code, body = postAuth("/purge", "application/json")
	var ts TopicStats
	if code != 200 || json.Unmarshal(body, &ts) != nil {
		t.Fatalf("purge: %d %s", code, body)
	}
	waitFor(t, 5*time.Second, "purged topic to be settled", func() bool { return g.Info().Pending == 0 })
	if code, _ := postAuth("/../nope/purge", "application/json"); code == 200 {
		t.Fatal("purge of a missing topic answered 200")
	}
}

func TestBrowseMessagesEventsHistory(t *testing.T) {
	b := openBroker(t)
	s := startAdmin(t, Options{Broker: staticBroker(b)})
	tp, err := b.CreateTopic("orders", broker.TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := tp.Group("billing", broker.GroupConfig{MaxDeliveries: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := time.Now()
	for i := range 5 {
		if _, err := tp.Publish(ctx, broker.Message{Subject: "orders", Data: []byte(fmt.Sprintf("order-%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := g.Poll(ctx, 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("poll: %d %v", len(ds), err)
	}
	if err := ds[0].Nack(ctx, 0); err != nil {
		t.Fatal(err)
	}
	ds, err = g.Poll(ctx, 1)
	if err != nil || len(ds) != 1 || ds[0].Handle.Seq != 1 {
		t.Fatalf("re-poll: %v %v", ds, err)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}

	base := s.URL() + "/api/topics/orders/partitions/0"
	var page MessagePage
	getJSON(t, base+"/messages?from=2&limit=2", &page)
	if len(page.Messages) != 2 || page.Messages[0].Seq != 2 || page.Messages[0].Data != "order-1" || page.Next != 4 {
		t.Fatalf("page from 2: %+v", page)
	}
	getJSON(t, base+"/messages?from="+fmt.Sprint(page.Next), &page)
	if len(page.Messages) != 2 || page.Messages[1].Data != "order-4" || page.Next != 6 {
		t.Fatalf("second page: %+v", page)
	}
	getJSON(t, base+"/messages?time="+before.Add(-time.Second).UTC().Format(time.RFC3339Nano), &page)
	if len(page.Messages) != 5 || page.Messages[0].Seq != 1 {
		t.Fatalf("by time: %+v", page)
	}
	getJSON(t, base+"/messages?time="+fmt.Sprint(time.Now().Add(time.Hour).UnixMilli()), &page)
	if len(page.Messages) != 0 {
		t.Fatalf("by future time: %+v", page)
	}

	var h History
	getJSON(t, base+"/messages/1/history", &h)
	if h.Message == nil || h.Message.Data != "order-0" {
		t.Fatalf("history message: %+v", h)
	}
	var kinds []string
	for _, e := range h.Events {
		kinds = append(kinds, fmt.Sprintf("%s:%d:%s", e.Kind, e.Arg, e.GroupName))
	}
	if got := strings.Join(kinds, " "); got != "deliver:1:billing nack:0:billing deliver:2:billing settle:1:billing" {
		t.Fatalf("history of 1: %s", got)
	}

	var ev EventPage
	getJSON(t, base+"/events?limit=100", &ev)
	deliveries := 0
	for _, e := range ev.Events {
		if e.Kind == "deliver" {
			deliveries++
		}
	}
	if deliveries != 2 || ev.Next == 0 {
		t.Fatalf("events: %+v", ev)
	}

	for _, bad := range []struct {
		path string
		want int
	}{
		{"/api/topics/orders/partitions/1/messages", 404},
		{"/api/topics/nope/partitions/0/messages", 404},
		{"/api/topics/orders/partitions/0/messages?limit=0", 400},
		{"/api/topics/orders/partitions/0/messages?from=x", 400},
		{"/api/topics/orders/partitions/0/messages?time=yesterday", 400},
		{"/api/topics/orders/partitions/0/messages/0/history", 400},
	} {
		if code, body := get(t, s.URL()+bad.path); code != bad.want {
			t.Errorf("%s: %d %s, want %d", bad.path, code, body, bad.want)
		}
	}
}

// TestGroupCountersAndSyncMetrics: the engine's per-group counters and the
// fsync/group-commit histograms reach /metrics.
func TestGroupCountersAndSyncMetrics(t *testing.T) {
	sm := NewSyncMetrics()
	o := broker.DefaultOptions()
	o.SegmentSize, o.EventSegmentSize = 1<<20, 1<<20
	o.Observer = sm
	b, err := broker.Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	s := startAdmin(t, Options{Broker: staticBroker(b), Sync: sm, Conns: totalsConns{}})
	tp, _ := b.CreateTopic("jobs", broker.TopicConfig{})
	g, _ := tp.Group("w", broker.GroupConfig{MaxDeliveries: 1})
	publish(t, tp, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := g.Poll(ctx, 4)
	if err != nil || len(ds) != 4 {
		t.Fatalf("poll %d %v", len(ds), err)
	}
	_ = ds[0].Ack(ctx)
	_ = ds[1].Nack(ctx, 0)
	_ = ds[2].Reject(ctx)
	lbl := `{group="w",topic="jobs"}`
	waitFor(t, 5*time.Second, "group counters in /metrics", func() bool {
		_, body := get(t, s.URL()+"/metrics")
		text := string(body)
		for _, c := range []struct {
			name string
			want float64
		}{
			{"fibril_group_delivered_total", 4}, {"fibril_group_acked_total", 1},
			{"fibril_group_nacked_total", 1}, {"fibril_group_rejected_total", 1},
			{"fibril_group_dead_lettered_total", 2},
		} {
			if v, ok := metricValue(t, text, c.name, lbl); !ok || v != c.want {
				return false
			}
		}
		n, ok := metricValue(t, text, "fibril_fsync_seconds_count", "")
		bs, ok2 := metricValue(t, text, "fibril_group_commit_batch_messages_sum", "")
		tot, ok3 := metricValue(t, text, "fibril_server_in_bytes_total", "")
		return ok && n > 0 && ok2 && bs >= 4 && ok3 && tot == 42
	})
}

// totalsConns is a ConnSource with server-wide totals.
type totalsConns struct{}

func (totalsConns) Connections() []ConnInfo { return nil }
func (totalsConns) Totals() ServerTotals    { return ServerTotals{Connections: 3, InBytes: 42} }
