package clusternode

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/cluster"
)

// TestPlacementFixedAtCreate: a topic of replicas 1 on 3 nodes has each
// partition's raft group on its one holder only, the same placement on
// every node, including one that was down when the topic was made (it
// applies the recorded placement, never placing again), and after a
// restart; only the holder has the partition's directory.
func TestPlacementFixedAtCreate(t *testing.T) {
	c := newTestCluster(t)
	n1 := c.live["n1"]
	c.stop("n3")
	tp := retry(t, "create r1", func() (*broker.Topic, error) {
		return n1.Broker().CreateTopic("r1", broker.TopicConfig{Partitions: 3, Replicas: 1})
	})
	var want [][]string
	for i := range 3 {
		want = append(want, tp.Holders(broker.Partition(i)))
	}
	c.start("n3")
	check := func(when string) {
		t.Helper()
		for name, n := range c.live {
			var got *broker.Topic
			waitFor(t, "r1 on "+name, func() bool {
				var ok bool
				got, ok = n.Broker().Topic("r1")
				return ok
			})
			for i := range 3 {
				idx := broker.Partition(i)
				if h := got.Holders(idx); !slices.Equal(h, want[i]) || len(h) != 1 {
					t.Fatalf("%s: %s partition %d on %v, want %v (one node)", when, name, i, h, want[i])
				}
				holds := want[i][0] == name
				dir := filepath.Join(c.cfgs[name].Dir, "topics", strconv.FormatUint(uint64(got.ID()), 10), strconv.Itoa(i))
				if _, err := os.Stat(dir); holds != (err == nil) {
					t.Errorf("%s: %s holds partition %d: %v, its directory: %v", when, name, i, holds, err)
				}
				g := n.Raft().Group(GroupOf(got.ID(), i))
				if !holds {
					if g != nil {
						t.Errorf("%s: %s runs a group of partition %d it does not hold", when, name, i)
					}
					continue
				}
				if g == nil {
					t.Fatalf("%s: %s holds partition %d but runs no group for it", when, name, i)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				st, err := g.Status(ctx)
				cancel()
				if err != nil || !slices.Equal(st.Voters, []uint64{cluster.NodeID(name)}) {
					t.Errorf("%s: partition %d group voters %v (%v), want only %s", when, i, st.Voters, err, name)
				}
			}
		}
	}
	check("after create")
	for _, name := range []string{"n1", "n2", "n3"} {
		c.stop(name)
		c.start(name)
	}
	check("after restarts")
}
