package tui

import (
	"testing"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

func TestRatesSampledOncePerInterval(t *testing.T) {
	m := newModel(nil, Options{Interval: time.Second})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	snap := func(at time.Duration, published, acked uint64) snapshot {
		return snapshot{at: t0.Add(at), topics: []topicView{{
			name: "orders", published: published,
			groups: []groupView{{name: "billing", acked: acked}},
		}}}
	}
	for _, step := range []struct {
		s           snapshot
		wantSamples int
		wantPub     float64
		wantAck     float64
	}{
		{snap(0, 0, 0), 1, 0, 0},                           // first: nothing to compare
		{snap(time.Second, 100, 10), 2, 100, 10},           // one interval later
		{snap(1100*time.Millisecond, 200, 20), 2, 100, 10}, // a refresh after a key press: no sample
		{snap(2*time.Second, 300, 30), 3, 200, 20},         // measured against t0+1s
		{snap(4*time.Second, 250, 30), 4, 0, 0},            // counters going back (topic recreated): 0, not negative
	} {
		m.apply(step.s)
		ps, as := m.pubRate["orders"], m.ackRate["orders/billing"]
		if len(ps.vals) != step.wantSamples || ps.last() != step.wantPub || as.last() != step.wantAck {
			t.Fatalf("after %v: %d samples, pub %v ack %v; want %d, %v, %v",
				step.s.at.Sub(t0), len(ps.vals), ps.last(), as.last(), step.wantSamples, step.wantPub, step.wantAck)
		}
		if m.snap.at != step.s.at {
			t.Fatalf("latest snapshot not kept")
		}
	}
}

func TestSelectionFollowsTopics(t *testing.T) {
	m := newModel(nil, Options{Interval: time.Second, DemoSubject: "fibril.demo"})
	m.apply(snapshot{at: time.Now(), topics: []topicView{{name: "a"}, {name: "b"}, {name: "$DLQ.a.g"}}})
	for _, tc := range []struct {
		key    string
		target string
	}{
		{"down", "b"},
		{"down", "fibril.demo"}, // a dead-letter topic is never published to
		{"down", "fibril.demo"},
		{"up", "b"},
		{"k", "a"},
		{"up", "a"},
	} {
		m.key(tc.key)
		if got := m.target(); got != tc.target {
			t.Fatalf("after %s: target %q, want %q", tc.key, got, tc.target)
		}
	}
	m.apply(snapshot{at: time.Now().Add(time.Hour), topics: []topicView{{name: "a"}}})
	m.selected = 5
	m.clampSelection()
	if m.selected != 0 {
		t.Fatalf("selection %d past the only topic", m.selected)
	}
}

// Stopping traffic while a round runs must still release that round's
// leases once it reports them (a bug once left them in flight).
func TestStopTrafficDuringRoundReleasesLeases(t *testing.T) {
	m := newModel(nil, Options{Interval: time.Second})
	m.traffic, m.busy = true, true // a round is running
	if cmd := m.key("t"); cmd != nil {
		t.Fatal("release started while the round still runs")
	}
	held := &heldLeases{msgs: []*fibril.Msg{{Subject: "orders"}}}
	_, cmd := m.Update(actionMsg{text: "round", held: held})
	if cmd == nil || !m.busy {
		t.Fatalf("round ended after stop: release cmd %v, busy %v", cmd != nil, m.busy)
	}
	// The release reports an empty hold: nothing more is scheduled for it.
	_, cmd = m.Update(actionMsg{text: "released", held: &heldLeases{}})
	if m.busy || len(m.held.msgs) != 0 || m.status != "released" {
		t.Fatalf("after release: busy %v held %d status %q", m.busy, len(m.held.msgs), m.status)
	}
	_ = cmd // a refresh
}
