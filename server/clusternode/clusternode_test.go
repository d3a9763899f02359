package clusternode

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/clustertest"
	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/replog"
)

// testCluster is three nodes in this process over real TCP and mutual
// TLS on 127.0.0.1, each with its own data directory.
type testCluster struct {
	t    *testing.T
	cfgs map[string]Config
	live map[string]*Node
}

func newTestCluster(t *testing.T) *testCluster {
	names := []string{"n1", "n2", "n3"}
	members := clustertest.Members(t, names...)
	base := t.TempDir()
	c := &testCluster{t: t, cfgs: map[string]Config{}, live: map[string]*Node{}}
	for _, n := range names {
		m := members[n]
		c.cfgs[n] = Config{Name: n, Listen: m.Addr, Peers: m.Peers, TLS: m.TLS,
			Dir: filepath.Join(base, n), Tick: 20 * time.Millisecond, ElectionTicks: 10,
			Engine: broker.Options{SegmentSize: 1 << 20, EventSegmentSize: 1 << 20},
			Logf:   func(f string, a ...any) { t.Logf(n+": "+f, a...) }}
	}
	for _, n := range names {
		c.start(n)
	}
	t.Cleanup(func() {
		for n := range c.live {
			c.stop(n)
		}
	})
	return c
}

func (c *testCluster) start(name string) *Node {
	c.t.Helper()
	n, err := Open(c.cfgs[name])
	if err != nil {
		c.t.Fatalf("open %s: %v", name, err)
	}
	c.live[name] = n
	return n
}

func (c *testCluster) stop(name string) {
	c.t.Helper()
	if err := c.live[name].Close(); err != nil {
		c.t.Logf("close %s: %v", name, err)
	}
	delete(c.live, name)
}

// retry runs op until it succeeds, retrying the errors a change meets
// while the metadata group elects a leader.
func retry[T any](t *testing.T, what string, op func() (T, error)) T {
	t.Helper()
	var last error
	for range 300 {
		v, err := op()
		if err == nil {
			return v
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, last)
	var zero T
	return zero
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestCatalogReplicated: a topic created on one node, a group created
// on another and paused on the third exist on every node with the same
// ids and state; a conflicting create is refused alike; deletes reach
// every node.
func TestCatalogReplicated(t *testing.T) {
	c := newTestCluster(t)
	n1, n2, n3 := c.live["n1"], c.live["n2"], c.live["n3"]
	t1 := retry(t, "create orders on n1", func() (*broker.Topic, error) {
		return n1.Broker().CreateTopic("orders", broker.TopicConfig{Partitions: 2})
	})
	g2 := retry(t, "create group on n2", func() (*broker.Group, error) {
		t2, ok := n2.Broker().Topic("orders")
		if !ok {
			return nil, broker.ErrNoTopic
		}
		return t2.Group("workers", broker.GroupConfig{LeaseMs: 5000})
	})
	for _, n := range []*Node{n1, n2, n3} {
		waitFor(t, "orders and workers everywhere", func() bool {
			tt, ok := n.Broker().Topic("orders")
			if !ok {
				return false
			}
			g, ok := tt.FindGroup("workers")
			return ok && tt.ID() == t1.ID() && g.ID() == g2.ID() && tt.Config().Partitions == 2
		})
	}
	if _, err := n3.Broker().CreateTopic("orders", broker.TopicConfig{Partitions: 1}); !errors.Is(err, broker.ErrTopicExists) {
		t.Fatalf("second create of orders on n3: %v, want ErrTopicExists", err)
	}
	t3, _ := n3.Broker().Topic("orders")
	g3, _ := t3.FindGroup("workers")
	if err := g3.Pause(); err != nil {
		t.Fatalf("pause on n3: %v", err)
	}
	for _, n := range []*Node{n1, n2, n3} {
		waitFor(t, "paused everywhere", func() bool {
			tt, _ := n.Broker().Topic("orders")
			g, ok := tt.FindGroup("workers")
			return ok && g.Paused()
		})
	}
	// A group with a dead-letter topic: the topic is made by the same
	// change on every node, with the same id.
	retry(t, "group with dead letters", func() (*broker.Group, error) {
		return t1.Group("audit", broker.GroupConfig{MaxDeliveries: 2})
	})
	dlq, ok := n1.Broker().Topic("$DLQ.orders.audit")
	if !ok {
		t.Fatal("no dead-letter topic on n1")
	}
	for _, n := range []*Node{n2, n3} {
		waitFor(t, "dead-letter topic everywhere", func() bool {
			d, ok := n.Broker().Topic("$DLQ.orders.audit")
			return ok && d.ID() == dlq.ID()
		})
	}
	if err := n2.Broker().DeleteTopic("orders"); err != nil {
		t.Fatalf("delete orders on n2: %v", err)
	}
	for _, n := range []*Node{n1, n2, n3} {
		waitFor(t, "orders gone everywhere", func() bool {
			_, ok := n.Broker().Topic("orders")
			return !ok
		})
	}
}

// TestCatalogCatchesUpAfterRestart: changes made while a node is down
// reach it when it starts again, with the same ids, and a restart
// applies no change twice (a topic deleted and made again keeps the new
// id).
func TestCatalogCatchesUpAfterRestart(t *testing.T) {
	c := newTestCluster(t)
	n1 := c.live["n1"]
	retry(t, "create a", func() (*broker.Topic, error) { return n1.Broker().CreateTopic("a", broker.TopicConfig{}) })
	waitFor(t, "a on n3", func() bool { _, ok := c.live["n3"].Broker().Topic("a"); return ok })
	c.stop("n3")
	// A change whose outcome is unknown (the metadata leader was n3) is
	// retried; a retried delete that finds nothing was applied before.
	retry(t, "delete a", func() (bool, error) {
		if err := n1.Broker().DeleteTopic("a"); err != nil && !errors.Is(err, broker.ErrNoTopic) {
			return false, err
		}
		return true, nil
	})
	a2 := retry(t, "create a again", func() (*broker.Topic, error) { return n1.Broker().CreateTopic("a", broker.TopicConfig{}) })
	b := retry(t, "create b", func() (*broker.Topic, error) { return n1.Broker().CreateTopic("b", broker.TopicConfig{}) })
	n3 := c.start("n3")
	waitFor(t, "n3 caught up", func() bool {
		ta, okA := n3.Broker().Topic("a")
		tb, okB := n3.Broker().Topic("b")
		return okA && okB && ta.ID() == a2.ID() && tb.ID() == b.ID()
	})
	idx := n3.Broker().CatalogIndex()
	c.stop("n3")
	n3 = c.start("n3")
	if got := n3.Broker().CatalogIndex(); got != idx {
		t.Fatalf("catalog index after a restart %d, want %d", got, idx)
	}
	ta, ok := n3.Broker().Topic("a")
	if !ok || ta.ID() != a2.ID() || len(n3.Broker().Topics()) != 2 {
		t.Fatalf("after a restart: topics %d, a ok %v", len(n3.Broker().Topics()), ok)
	}
}

// serving returns the node whose broker serves the topic's partition 0
// (a publish there is confirmed), waiting for one.
func (c *testCluster) serving(topic broker.TopicName) *Node {
	c.t.Helper()
	var found *Node
	waitFor(c.t, "a node serving "+string(topic), func() bool {
		for _, n := range c.live {
			t, ok := n.Broker().Topic(topic)
			if !ok {
				continue
			}
			g := n.Raft().Group(GroupOf(t.ID(), 0))
			if g != nil && g.Leader() == n.Raft().ID() {
				found = n
				return true
			}
		}
		return false
	})
	return found
}

// TestReplicatedTopicSurvivesLeaderLoss: messages confirmed by the
// leader of a replicated topic are all delivered by the node that leads
// after it closes; an ack answered before stays acked.
func TestReplicatedTopicSurvivesLeaderLoss(t *testing.T) {
	c := newTestCluster(t)
	n1 := c.live["n1"]
	retry(t, "create jobs", func() (*broker.Topic, error) { return n1.Broker().CreateTopic("jobs", broker.TopicConfig{}) })
	tp, _ := n1.Broker().Topic("jobs")
	retry(t, "group", func() (*broker.Group, error) { return tp.Group("w", broker.GroupConfig{LeaseMs: 60000}) })
	confirmed := map[string]bool{}
	publish := func(data string) {
		t.Helper()
		var last error
		for range 500 {
			lead := c.serving("jobs")
			tt, _ := lead.Broker().Topic("jobs")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := tt.Publish(ctx, broker.Message{Subject: "jobs", Data: []byte(data)})
			cancel()
			if err == nil {
				confirmed[data] = true
				return
			}
			if !errors.Is(err, broker.ErrNotLeader) && !errors.Is(err, replog.ErrNotLeader) {
				t.Fatalf("publish %s: %v", data, err)
			}
			last = err
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("publish %s: never confirmed: %v", data, last)
	}
	for i := range 40 {
		publish(fmt.Sprintf("m%02d", i))
	}
	acked := map[string]bool{}
	// poll polls the serving node until want deliveries arrived, then
	// until a poll comes back empty.
	poll := func(want, max int) map[string]broker.Delivery {
		t.Helper()
		got := map[string]broker.Delivery{}
		for range 500 {
			lead := c.serving("jobs")
			tt, _ := lead.Broker().Topic("jobs")
			g, ok := tt.FindGroup("w")
			if !ok {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			ds, err := g.Poll(ctx, max)
			cancel()
			for _, d := range ds {
				got[string(d.Data)] = d
			}
			if len(got) >= want && (len(ds) == 0 && err != nil || want == max) {
				return got
			}
		}
		t.Fatalf("polled %d of %d", len(got), want)
		return nil
	}
	for data, d := range poll(10, 10) {
		if err := d.Ack(context.Background()); err == nil {
			acked[data] = true
		}
	}
	if len(acked) == 0 {
		t.Fatal("no ack answered")
	}
	old := c.serving("jobs")
	c.stop(old.cfg.Name)
	lead := c.serving("jobs")
	if lead == old {
		t.Fatal("the closed node still serves")
	}
	rest := poll(len(confirmed)-len(acked), 100)
	for data := range confirmed {
		if !acked[data] && rest[data].Data == nil {
			t.Errorf("confirmed %s lost after the leader closed", data)
		}
	}
	for data := range rest {
		if acked[data] {
			t.Errorf("acked %s delivered again after the leader closed", data)
		}
		if !confirmed[data] {
			t.Errorf("delivered %s was never confirmed", data)
		}
	}
}
