package admin

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/broker"
)

// pollAs leases up to max deliveries of g to owner, waiting up to 5 s for
// at least one.
func pollAs(t *testing.T, g *broker.Group, max int, owner broker.OwnerID) []broker.Delivery {
	t.Helper()
	ch := make(chan []broker.Delivery, 1)
	errc := make(chan error, 1)
	if err := g.PollAsync(max, 5*time.Second, owner, func(ds []broker.Delivery, err error) {
		errc <- err
		ch <- append([]broker.Delivery(nil), ds...) // Handles are all we keep
	}); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return <-ch
}

// TestHistoryOwnerLabels: the history names the owner of each delivery and
// settle through the ConnSource's LookupConn, and falls back to the bare id.
func TestHistoryOwnerLabels(t *testing.T) {
	b := openBroker(t)
	s := startAdmin(t, Options{Broker: staticBroker(b), Conns: connList{{ID: 42, Remote: "10.0.0.1:999", Name: "app", User: "ann"}}})
	tp, err := b.CreateTopic("jobs", broker.TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := tp.Group("w", broker.GroupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, tp, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d1 := pollAs(t, g, 1, 42)
	d2 := pollAs(t, g, 1, 7) // not a connection the source knows
	if len(d1) != 1 || len(d2) != 1 || d2[0].Handle.Seq != 2 {
		t.Fatalf("polls: %v %v", d1, d2)
	}
	if err := d1[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d2[0].Nack(ctx, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		seq  string
		want []string
	}{
		{"1", []string{"deliver||conn 42 (app, user ann, 10.0.0.1:999)", "settle|ack|conn 42 (app, user ann, 10.0.0.1:999)"}},
		{"2", []string{"deliver||conn 7", "nack||conn 7"}},
	} {
		var h History
		getJSON(t, s.URL()+"/api/topics/jobs/partitions/0/messages/"+c.seq+"/history", &h)
		var got []string
		for _, e := range h.Events {
			got = append(got, e.Kind+"|"+e.Reason+"|"+e.OwnerLabel)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("history of %s\n got %q\nwant %q", c.seq, got, c.want)
		}
		if c.seq == "2" && (len(h.Events) != 2 || h.Events[1].Arg != uint64(1500*time.Millisecond) || h.Events[1].Conn != nil) {
			t.Errorf("nack event: %+v", h.Events)
		}
	}
}

func TestConnRefLabel(t *testing.T) {
	for _, c := range []struct {
		ref  ConnRef
		want string
	}{
		{ConnRef{ID: 17, Name: "worker-a", Remote: "127.0.0.1:51234", Open: true}, "conn 17 (worker-a, 127.0.0.1:51234)"},
		{ConnRef{ID: 3, Remote: "[::1]:9", User: "bob"}, "conn 3 (user bob, [::1]:9, closed)"},
		{ConnRef{ID: 5, Open: true}, "conn 5"},
	} {
		if got := c.ref.Label(); got != c.want {
			t.Errorf("%+v.Label() = %q, want %q", c.ref, got, c.want)
		}
	}
}
