package admin

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fibrilmq/fibril/server/broker"
)

// fakeCluster is a ClusterSource returning a fixed view; it records
// whether each call came with a deadline.
type fakeCluster struct {
	v           ClusterView
	calls       atomic.Int64
	noDeadlines atomic.Int64
}

func (f *fakeCluster) ClusterView(ctx context.Context) ClusterView {
	f.calls.Add(1)
	if _, ok := ctx.Deadline(); !ok {
		f.noDeadlines.Add(1)
	}
	v := f.v
	v.Nodes = append([]ClusterNode(nil), f.v.Nodes...)
	v.Partitions = append([]PartitionGroup(nil), f.v.Partitions...)
	return v
}

// TestClusterViewOverHTTP: /api/cluster and /metrics render the source's
// view (nodes and partitions sorted, followers of led groups only,
// partitions of topics the engine does not have left out, the metadata
// group as group="meta"), and every call to the source is bounded by a
// deadline.
func TestClusterViewOverHTTP(t *testing.T) {
	b := openBroker(t)
	if _, err := b.CreateTopic("orders", broker.TopicConfig{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	led := RaftGroup{Role: "leader", Leader: "n1", Term: 3, Commit: 40, Applied: 39, Last: 42, Campaigns: 2,
		Followers: []Follower{{Name: "n2", Match: 42}, {Name: "n3", Match: 30, Lag: 12}}}
	src := &fakeCluster{v: ClusterView{Node: "n1",
		Nodes: []ClusterNode{{Name: "n3", Client: "h3:4222"}, {Name: "n1", Client: "h1:4222"}, {Name: "n2", Client: "h2:4222", LeaderOfMeta: true}},
		Meta:  &RaftGroup{Role: "follower", Leader: "n2", Term: 7, Commit: 9, Applied: 9, Last: 9},
		Partitions: []PartitionGroup{
			{Topic: "orders", Partition: 1, Replicas: []string{"n1", "n2"}, RaftGroup: RaftGroup{Role: "follower", Leader: "n2", Term: 3, Commit: 5, Applied: 5, Last: 5, Dropped: 4}},
			{Topic: "orders", Partition: 2, Replicas: []string{"n2", "n3"}, Elsewhere: true}, // no replica here: no status, no series
			{Topic: "gone", Partition: 0, RaftGroup: led},
			{Topic: "orders", Partition: 0, Replicas: []string{"n1", "n2", "n3"}, RaftGroup: led},
		},
		Unanswered: 1}}
	s := startAdmin(t, Options{Broker: staticBroker(b), Cluster: src})

	code, body := get(t, s.URL()+"/api/cluster")
	want := `{"node":"n1","nodes":[{"name":"n1","client":"h1:4222","leader_of_meta":false},{"name":"n2","client":"h2:4222","leader_of_meta":true},{"name":"n3","client":"h3:4222","leader_of_meta":false}],` +
		`"partitions":[{"topic":"orders","partition":0,"leader":"n1","followers":[{"name":"n2","match":42,"lag":0},{"name":"n3","match":30,"lag":12}],"term":3,"commit":40,"replicas":["n1","n2","n3"],"held_here":true},` +
		`{"topic":"orders","partition":1,"leader":"n2","followers":null,"term":3,"commit":5,"replicas":["n1","n2"],"held_here":true},` +
		`{"topic":"orders","partition":2,"leader":"","followers":null,"term":0,"commit":0,"replicas":["n2","n3"],"held_here":false}],"unanswered":1}`
	if code != 200 || strings.TrimSpace(string(body)) != want {
		t.Errorf("/api/cluster: %d\n got %s\nwant %s", code, body, want)
	}

	_, m := get(t, s.URL()+"/metrics")
	text := string(m)
	for _, line := range []string{
		`fibril_cluster_nodes 3`,
		`fibril_raft_status_unanswered 1`,
		`fibril_raft_term{group="meta",partition="",topic=""} 7`,
		`fibril_raft_leader{group="meta",partition="",topic=""} 0`,
		`fibril_raft_term{group="",partition="0",topic="orders"} 3`,
		`fibril_raft_leader{group="",partition="0",topic="orders"} 1`,
		`fibril_raft_leader{group="",partition="1",topic="orders"} 0`,
		`fibril_raft_commit_index{group="",partition="0",topic="orders"} 40`,
		`fibril_raft_applied_index{group="",partition="0",topic="orders"} 39`,
		`fibril_raft_campaigns_total{group="",partition="0",topic="orders"} 2`,
		`fibril_raft_dropped_messages_total{group="",partition="1",topic="orders"} 4`,
		`fibril_raft_follower_lag{follower="n3",group="",partition="0",topic="orders"} 12`,
		`fibril_raft_follower_lag{follower="n2",group="",partition="0",topic="orders"} 0`,
	} {
		if !strings.Contains(text, "\n"+line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	if strings.Contains(text, `fibril_raft_follower_lag{follower="n2",group="",partition="1"`) {
		t.Errorf("a follower's group exports follower lag")
	}
	if strings.Contains(text, `fibril_raft_term{group="",partition="2"`) {
		t.Errorf("a partition held elsewhere exports raft series")
	}
	if n := src.calls.Load(); n != 2 || src.noDeadlines.Load() != 0 {
		t.Errorf("source called %d times, %d without a deadline", n, src.noDeadlines.Load())
	}
}
