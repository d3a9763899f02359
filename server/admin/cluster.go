package admin

// The cluster view: GET /api/cluster and the fibril_raft_* and
// fibril_cluster_* series of /metrics, both read at request time from
// Options.Cluster (the server's node; nil on a single node). Every raft
// group answers its status through its own goroutine, so a ClusterSource
// is always called with a deadline (clusterTimeout) and reports the groups
// that did not answer in time instead of waiting for them.

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
	"github.com/prometheus/client_golang/prometheus"
)

// clusterTimeout bounds one scrape's or request's wait for the raft
// groups' status, whatever their number.
const clusterTimeout = 2 * time.Second

// ClusterSource describes the cluster the server is a node of.
// ClusterView is called from an HTTP goroutine once per request or scrape;
// it must return by ctx's deadline (a group that has not answered by then
// is counted in ClusterView.Unanswered, not waited for) and return fresh
// slices.
type ClusterSource interface {
	ClusterView(ctx context.Context) ClusterView
}

// ClusterView is one node's view of its cluster.
type ClusterView struct {
	// Node is this node's name.
	Node string
	// Nodes are the cluster's nodes, sorted by name.
	Nodes []ClusterNode
	// Meta is the metadata group (the catalog) as this node sees it; nil
	// when it did not answer in time.
	Meta *RaftGroup
	// Partitions are the partition groups this node runs, sorted by
	// topic and partition.
	Partitions []PartitionGroup
	// Unanswered counts the groups (the metadata group included) whose
	// status did not come before the deadline; they are left out.
	Unanswered int
}

// ClusterNode is one node of the cluster.
type ClusterNode struct {
	Name string `json:"name"`
	// Client is the address the node announced for clients ("" until its
	// announcement is applied here).
	Client string `json:"client"`
	// LeaderOfMeta is true for the node that leads the metadata group.
	LeaderOfMeta bool `json:"leader_of_meta"`
}

// RaftGroup is one raft group as this node's replica sees it
// (cluster.Status with the replicas named).
type RaftGroup struct {
	// Role is "leader", "follower", "candidate" or "pre-candidate";
	// Leader the leader's node name ("" while none is known).
	Role   string
	Leader string
	// Term, Commit, Applied and Last are raft's term, commit index, the
	// index applied here and the last index of this replica's log.
	Term, Commit, Applied, Last uint64
	// Campaigns and Dropped are the replica's elections started and
	// received messages dropped for a full inbox, since it opened.
	Campaigns, Dropped uint64
	// Followers are the other replicas and how far each is behind, known
	// only where this node leads the group (nil elsewhere), sorted by name.
	Followers []Follower
}

// Follower is a replica as its group's leader sees it.
type Follower struct {
	Name string `json:"name"`
	// Match is the last index known to match the leader's log; Lag is the
	// leader's last index minus Match.
	Match uint64 `json:"match"`
	Lag   uint64 `json:"lag"`
}

// PartitionGroup is one partition's raft group. A partition this node
// holds no replica of (its topic's replicas are fewer than the nodes) is
// listed with its Replicas and Elsewhere set, and no group status.
type PartitionGroup struct {
	Topic     string
	Partition int
	// Replicas names the nodes holding the partition (its placement,
	// fixed when the topic was created), sorted.
	Replicas  []string
	Elsewhere bool
	RaftGroup
}

// clusterJSON is GET /api/cluster's answer.
type clusterJSON struct {
	Node       string          `json:"node"`
	Nodes      []ClusterNode   `json:"nodes"`
	Partitions []partitionJSON `json:"partitions"`
	// Unanswered: groups whose status did not come in time (left out).
	Unanswered int `json:"unanswered"`
}

type partitionJSON struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Leader    string `json:"leader"`
	// Followers is null where this node does not lead the partition
	// (their progress is known to the leader only).
	Followers []Follower `json:"followers"`
	Term      uint64     `json:"term"`
	Commit    uint64     `json:"commit"`
	// Replicas names the nodes holding the partition; HeldHere is false
	// where this node holds none (then the leader is "": this node runs
	// no replica of the group, and forwards to the replicas).
	Replicas []string `json:"replicas"`
	HeldHere bool     `json:"held_here"`
}

// clusterView asks the source, bounded by clusterTimeout.
func (s *Server) clusterView(ctx context.Context) ClusterView {
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	v := s.opts.Cluster.ClusterView(ctx)
	slices.SortFunc(v.Nodes, func(a, b ClusterNode) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(v.Partitions, func(a, b PartitionGroup) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return v
}

// handleCluster answers GET /api/cluster: on a single node (no
// Options.Cluster) {"node": "", "nodes": [], "partitions": []}; in a
// cluster the nodes and the partitions of the topics the caller may view.
func (s *Server) handleCluster(w http.ResponseWriter, r *http.Request, b *broker.Broker) {
	out := clusterJSON{Nodes: []ClusterNode{}, Partitions: []partitionJSON{}}
	if s.opts.Cluster == nil {
		writeJSON(w, http.StatusOK, out)
		return
	}
	v := s.clusterView(r.Context())
	out.Node, out.Unanswered = v.Node, v.Unanswered
	out.Nodes = append(out.Nodes, v.Nodes...)
	id := identityOf(r)
	seen := map[string]bool{}
	for _, p := range v.Partitions {
		may, ok := seen[p.Topic]
		if !ok {
			t, found := b.Topic(broker.TopicName(p.Topic))
			may = found && id.Can(access.ViewTopic, accessTopic(t))
			seen[p.Topic] = may
		}
		if may {
			out.Partitions = append(out.Partitions, partitionJSON{Topic: p.Topic, Partition: p.Partition,
				Leader: p.Leader, Followers: p.Followers, Term: p.Term, Commit: p.Commit,
				Replicas: p.Replicas, HeldHere: !p.Elsewhere})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// clusterCollector exports the view on /metrics. The series are bounded by
// the groups this node runs times the cluster's nodes.
type clusterCollector struct {
	s                                        *Server
	nodes, unanswered                        *prometheus.Desc
	term, leader, commit, applied, campaigns *prometheus.Desc
	dropped, followerLag                     *prometheus.Desc
}

func newClusterCollector(s *Server) *clusterCollector {
	g := []string{"group", "topic", "partition"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("fibril_"+name, help, labels, nil)
	}
	return &clusterCollector{s: s,
		nodes:       d("cluster_nodes", "Nodes of the cluster this node knows."),
		unanswered:  d("raft_status_unanswered", "Raft groups whose status did not come within the scrape's bound (left out of this scrape)."),
		term:        d("raft_term", `Raft term of the group's replica here (group="meta": the catalog; otherwise topic and partition).`, g...),
		leader:      d("raft_leader", "1 while this node leads the group.", g...),
		commit:      d("raft_commit_index", "Raft commit index of the group's replica here.", g...),
		applied:     d("raft_applied_index", "Index applied to the group's state machine here.", g...),
		campaigns:   d("raft_campaigns_total", "Elections this replica started since it opened.", g...),
		dropped:     d("raft_dropped_messages_total", "Raft messages this replica dropped for a full inbox since it opened.", g...),
		followerLag: d("raft_follower_lag", "Entries a follower's log is behind the leader's last index (reported by the leader only).", append(g, "follower")...),
	}
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.nodes, c.unanswered, c.term, c.leader, c.commit, c.applied, c.campaigns, c.dropped, c.followerLag} {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.s.clusterView(context.Background())
	ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, float64(len(v.Nodes)))
	ch <- prometheus.MustNewConstMetric(c.unanswered, prometheus.GaugeValue, float64(v.Unanswered))
	emit := func(g RaftGroup, l ...string) {
		gauge := func(d *prometheus.Desc, x uint64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(x), slices.Concat(l, extra)...)
		}
		counter := func(d *prometheus.Desc, x uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(x), l...)
		}
		lead := uint64(0)
		if g.Role == "leader" {
			lead = 1
		}
		gauge(c.term, g.Term)
		gauge(c.leader, lead)
		gauge(c.commit, g.Commit)
		gauge(c.applied, g.Applied)
		counter(c.campaigns, g.Campaigns)
		counter(c.dropped, g.Dropped)
		for _, f := range g.Followers {
			gauge(c.followerLag, f.Lag, f.Name)
		}
	}
	if v.Meta != nil {
		emit(*v.Meta, "meta", "", "")
	}
	for _, p := range v.Partitions {
		if !p.Elsewhere {
			emit(p.RaftGroup, "", p.Topic, strconv.Itoa(p.Partition))
		}
	}
}
