package server

// The admin listener's view of the cluster (admin.ClusterSource): the
// nodes, and each raft group this node runs as its replica sees it, read
// when /api/cluster or /metrics asks. A group answers its status through
// its own goroutine, so each is asked with a deadline of its own
// (groupStatusTimeout) inside the caller's: a stuck group costs a scrape
// at most that, and groups still unasked when the caller's deadline passes
// are counted unanswered.

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/fibrilmq/fibril/server/admin"
	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/cluster"
	"github.com/fibrilmq/fibril/server/clusternode"
)

// groupStatusTimeout bounds the wait for one group's status.
const groupStatusTimeout = 250 * time.Millisecond

// clusterSource is the server's admin.ClusterSource.
type clusterSource struct{ s *Server }

// adminCluster is the admin listener's Cluster option: nil on a single
// node (never a typed nil).
func (s *Server) adminCluster() admin.ClusterSource {
	if s.cluster == nil {
		return nil
	}
	return clusterSource{s}
}

// ClusterView implements admin.ClusterSource.
func (c clusterSource) ClusterView(ctx context.Context) admin.ClusterView {
	n := c.s.cluster.node
	rn := n.Raft()
	v := admin.ClusterView{Node: c.s.opts.Cluster.Name}

	// The nodes: the configured members and any other that announced
	// itself. Only the client address is shown of an announcement (its
	// forwarding token is a secret of the cluster's).
	announced := n.Catalog().Nodes()
	names := n.Members()
	for name := range announced {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	byID := make(map[uint64]string, len(names))
	for _, name := range names {
		byID[cluster.NodeID(name)] = name
	}
	var metaLead uint64
	if g := rn.Group(cluster.MetaGroup); g != nil {
		metaLead = g.Leader()
	}
	for _, name := range slices.Sorted(slices.Values(names)) {
		v.Nodes = append(v.Nodes, admin.ClusterNode{Name: name, Client: announced[name].Client,
			LeaderOfMeta: metaLead != 0 && cluster.NodeID(name) == metaLead})
	}

	ask := func(g *cluster.Group) (admin.RaftGroup, bool) { return askStatus(ctx, g, byID) }
	if g := rn.Group(cluster.MetaGroup); g != nil {
		if rg, ok := ask(g); ok {
			v.Meta = &rg
		} else {
			v.Unanswered++
		}
	}
	members := n.Members()
	for _, t := range n.Broker().Topics() {
		for i := range t.Config().Partitions {
			holders := t.Holders(broker.Partition(i))
			if holders == nil {
				holders = members
			}
			pg := admin.PartitionGroup{Topic: string(t.Name()), Partition: i, Replicas: holders}
			if !t.HeldHere(broker.Partition(i)) {
				pg.Elsewhere = true
				v.Partitions = append(v.Partitions, pg)
				continue
			}
			g := rn.Group(clusternode.GroupOf(t.ID(), i))
			if g == nil {
				continue // the partition is not open here
			}
			rg, ok := ask(g)
			if !ok {
				v.Unanswered++
				continue
			}
			pg.RaftGroup = rg
			v.Partitions = append(v.Partitions, pg)
		}
	}
	return v
}

// statusAsker is what the view needs of a group (*cluster.Group).
type statusAsker interface {
	Status(ctx context.Context) (cluster.Status, error)
}

// askStatus asks g for its status within groupStatusTimeout and ctx, and
// names its replicas; false when it did not answer (or ctx had ended, in
// which case g is not asked).
func askStatus(ctx context.Context, g statusAsker, byID map[uint64]string) (admin.RaftGroup, bool) {
	if ctx.Err() != nil {
		return admin.RaftGroup{}, false
	}
	gctx, cancel := context.WithTimeout(ctx, groupStatusTimeout)
	defer cancel()
	st, err := g.Status(gctx)
	if err != nil {
		return admin.RaftGroup{}, false
	}
	return raftGroupOf(st, byID), true
}

// raftGroupOf names the replicas of st by byID (a replica of no known
// node is shown by its raft ID in hex).
func raftGroupOf(st cluster.Status, byID map[uint64]string) admin.RaftGroup {
	name := func(id uint64) string {
		if id == 0 {
			return ""
		}
		if n, ok := byID[id]; ok {
			return n
		}
		return "id-" + strconv.FormatUint(id, 16)
	}
	rg := admin.RaftGroup{Role: st.Role, Leader: name(st.Leader), Term: st.Term, Commit: st.Commit,
		Applied: st.Applied, Last: st.Last, Campaigns: st.Campaigns, Dropped: st.Dropped}
	if st.Role != "leader" {
		return rg
	}
	rg.Followers = []admin.Follower{}
	for _, id := range slices.Sorted(maps.Keys(st.Match)) {
		if id == st.ID {
			continue
		}
		m := st.Match[id]
		rg.Followers = append(rg.Followers, admin.Follower{Name: name(id), Match: m, Lag: st.Last - min(m, st.Last)})
	}
	slices.SortFunc(rg.Followers, func(a, b admin.Follower) int { return cmp.Compare(a.Name, b.Name) })
	return rg
}
