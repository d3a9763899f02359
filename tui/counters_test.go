package tui

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/testserver"
	fibril "github.com/fibrilmq/fibril/sdk"
	"github.com/fibrilmq/fibril/server"
)

// startOn runs an in-process server with its data in dir and the admin
// listener on; stop shuts it down (and is also run at cleanup).
func startOn(t *testing.T, dir string) (s *server.Server, stop func()) {
	t.Helper()
	opts := testserver.Options(t)
	opts.DataDir = dir
	opts.HTTPListen = "127.0.0.1:0"
	s, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-s.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("Run: %v", err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return s, stop
}

// counts are one group's numbers as one reader shows them.
type counts struct{ redelivered, deadLettered uint64 }

// TestCountersAgreeAfterRestart: the wire (GROUP INFO), the admin API the
// dashboard draws from and the TUI show the same redelivered and
// dead-lettered counts for a group, before and after a restart (they used
// to start at zero on every start in the API and dashboard while the TUI,
// counting the dead-letter topic, showed 3). TOPIC INFO's partitions carry
// their bytes (they read 0).
func TestCountersAgreeAfterRestart(t *testing.T) {
	dir := t.TempDir()
	s, stop := startOn(t, dir)
	c := testClient(t, s)
	createTopic(t, c, "jobs", fibril.TopicConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.conn.CreateGroup(ctx, "jobs", "workers", fibril.GroupConfig{MaxDeliveries: 2}); err != nil {
		t.Fatal(err)
	}
	if n, err := c.publish("jobs", 5, func(int) []byte { return []byte("job") }); err != nil || n != 5 {
		t.Fatalf("publish: %d %v", n, err)
	}
	// Five deliveries, all nacked; five redeliveries, two acked and three
	// nacked at their last allowed delivery: dead-lettered.
	msgs, err := c.conn.Fetch(ctx, "jobs", "workers", 5, time.Second)
	if err != nil || len(msgs) != 5 {
		t.Fatalf("fetch: %d %v", len(msgs), err)
	}
	for _, m := range msgs {
		if err := m.Nack(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err = c.conn.Fetch(ctx, "jobs", "workers", 5, time.Second)
	if err != nil || len(msgs) != 5 {
		t.Fatalf("refetch: %d %v", len(msgs), err)
	}
	if err := c.conn.AckAll(ctx, msgs[:2]...); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs[2:] {
		if err := m.Nack(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	want := counts{redelivered: 5, deadLettered: 3}

	check := func(when string, s *server.Server, c *client) {
		t.Helper()
		var wire counts
		testserver.WaitFor(t, 10*time.Second, when+": 3 dead letters on the wire", func() bool {
			gi, err := c.groupInfo("jobs", "workers")
			if err != nil {
				t.Fatal(err)
			}
			wire = counts{gi.Redelivered, gi.DeadLettered}
			return wire.deadLettered >= want.deadLettered
		})
		var api struct {
			Topics []struct {
				Name      string `json:"name"`
				Published uint64 `json:"published"`
				Bytes     int64  `json:"bytes"`
				Groups    []struct {
					Name         string `json:"name"`
					Redelivered  uint64 `json:"redelivered"`
					DeadLettered uint64 `json:"dead_lettered"`
				} `json:"groups"`
			} `json:"topics"`
		}
		resp, err := http.Get("http://" + s.HTTPAddr().String() + "/api/topics")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&api)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var apiCounts counts
		var dlqPublished uint64
		for _, tp := range api.Topics {
			for _, g := range tp.Groups {
				if tp.Name == "jobs" && g.Name == "workers" {
					apiCounts = counts{g.Redelivered, g.DeadLettered}
				}
			}
			if tp.Name == "$DLQ.jobs.workers" {
				dlqPublished = tp.Published
			}
		}
		snap, err := fetch(c)
		if err != nil {
			t.Fatal(err)
		}
		var tuiDead uint64
		for _, tv := range snap.topics {
			for _, g := range tv.groups {
				if tv.name == "jobs" && g.name == "workers" {
					tuiDead = g.dead
				}
			}
		}
		if wire != want || apiCounts != want || tuiDead != want.deadLettered || dlqPublished != want.deadLettered {
			t.Fatalf("%s: wire %+v, API %+v, TUI dead %d, dead-letter topic published %d; want %+v everywhere",
				when, wire, apiCounts, tuiDead, dlqPublished, want)
		}
		ti, err := c.topicInfo("jobs")
		if err != nil {
			t.Fatal(err)
		}
		var sum uint64
		for _, p := range ti.Partitions {
			sum += p.Bytes
		}
		if ti.Bytes == 0 || sum != ti.Bytes {
			t.Fatalf("%s: TOPIC INFO bytes %d, partitions' bytes add up to %d", when, ti.Bytes, sum)
		}
	}
	check("before the restart", s, c)
	stop()
	s, _ = startOn(t, dir)
	check("after the restart", s, testClient(t, s))
}
