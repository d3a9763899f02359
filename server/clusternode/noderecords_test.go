package clusternode

import (
	"maps"
	"sync"
	"testing"

	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/metacat"
)

// TestNodeRecordsSurviveRestart: a node restarted after a catalog change
// still knows the other nodes' records (client address, forwarding
// token), and tells OnNodes, though the records were applied before its
// catalog index and are not applied again. Before, it knew only the
// records announced after its restart, so it could forward nothing to a
// leader that had not announced again ("its leader has not announced its
// address yet") and its connect_urls missed the other nodes.
func TestNodeRecordsSurviveRestart(t *testing.T) {
	c := newTestCluster(t)
	want := map[string]metacat.NodeInfo{}
	for name, n := range c.live {
		info := metacat.NodeInfo{Client: "client-" + name, Forward: "token-" + name}
		want[name] = info
		n.Announce(info)
	}
	waitFor(t, "every record on n3", func() bool { return maps.Equal(c.live["n3"].Catalog().Nodes(), want) })
	n1 := c.live["n1"]
	retry(t, "create a", func() (*broker.Topic, error) { return n1.Broker().CreateTopic("a", broker.TopicConfig{}) })
	waitFor(t, "a on n3", func() bool { _, ok := c.live["n3"].Broker().Topic("a"); return ok })

	c.stop("n3")
	var mu sync.Mutex
	var told map[string]metacat.NodeInfo
	cfg := c.cfgs["n3"]
	cfg.OnNodes = func(m map[string]metacat.NodeInfo) { mu.Lock(); told = m; mu.Unlock() }
	c.cfgs["n3"] = cfg
	n3 := c.start("n3")
	waitFor(t, "n1's and n2's records on the restarted n3", func() bool {
		got := n3.Catalog().Nodes()
		return got["n1"] == want["n1"] && got["n2"] == want["n2"]
	})
	mu.Lock()
	defer mu.Unlock()
	if told["n1"] != want["n1"] || told["n2"] != want["n2"] {
		t.Fatalf("OnNodes after the restart told %v, want n1's and n2's records", told)
	}
}
