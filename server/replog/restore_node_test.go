package replog

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/clustertest"
	"github.com/fibrilmq/fibril/server/cluster"
	"github.com/fibrilmq/fibril/server/cluster/transport"
)

// nodeGroup is the partition group the node trios run.
const nodeGroup = 5

// newNodeTrio is a trio whose groups run on three cluster.Nodes in this
// process, linked over TCP with mutual TLS: fetches travel the real
// cluster link.
func newNodeTrio(t *testing.T, cfg Config) *trio {
	names := []string{"r1", "r2", "r3"}
	members := clustertest.Members(t, names...)
	tr := &trio{t: t, base: t.TempDir(), net: &Net{groups: map[uint64]*cluster.Group{}}, pairs: map[uint64]*Pair{}, fss: map[uint64]*gateFS{},
		cfg: cfg, nodes: map[uint64]*cluster.Node{}, names: names}
	for _, n := range names {
		m := members[n]
		node, err := cluster.NewNode(cluster.NodeConfig{Name: n, Listen: m.Addr, Seeds: m.Peers, Dir: filepath.Join(tr.base, "node-"+n),
			TLS: m.TLS, MetaLater: true, Tick: 5 * time.Millisecond, ElectionTicks: 40,
			Transport: transport.Options{MaxBackoff: 50 * time.Millisecond, ChunkSize: 4096}})
		if err != nil {
			t.Fatal(err)
		}
		if err := node.Start(); err != nil {
			t.Fatal(err)
		}
		tr.nodes[node.ID()] = node
	}
	for id := range tr.nodes {
		tr.open(id)
	}
	t.Cleanup(func() {
		for _, p := range tr.pairs {
			p.Data().Close()
			p.Events().Close()
		}
		for _, n := range tr.nodes {
			n.Stop()
		}
	})
	return tr
}

// TestPairRestoreOverNodes: the restore of TestPairRestoreFromPeer with
// the groups on cluster.Nodes: the replica fetches the logs over the
// cluster link (mutual TLS, CRC-checked chunks) and ends with the same
// records, position and state file as the leader.
func TestPairRestoreOverNodes(t *testing.T) {
	tr := newNodeTrio(t, restoreCfg())
	lag, lead := lagBehindSnapshot(t, tr)
	r := tr.open(lag)
	sameLogs(t, r, tr.pairs[lead])
	if m, _, _ := readMark(r.dir); m.gen != 1 {
		t.Fatalf("mark names generation %d, want 1 (restored from a peer)", m.gen)
	}
	if st := tr.nodes[lag].Stats().Transport; st.Fetches == 0 {
		t.Fatalf("no fetch over the cluster link: %+v", st)
	}
	var served uint64
	for _, n := range tr.nodes {
		served += n.Stats().Transport.FetchesServed
	}
	if served == 0 {
		t.Fatal("no node served a fetch to its end")
	}
}
