// Package clustertest gives tests the members of a cluster on this
// machine: for each node name a free loopback address for its cluster
// links, its certificate files from a fresh cluster CA (package
// certgen), and the other nodes as its peers. It owns nothing else: the
// tests start the nodes their own way.
package clustertest

import (
	"net"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/cluster"
	"github.com/fibrilmq/fibril/server/cluster/certgen"
	"github.com/fibrilmq/fibril/server/cluster/transport"
)

// Member is one node of a test cluster.
type Member struct {
	Name  string
	Addr  string // cluster listen address, a port the kernel picked and freed
	TLS   transport.TLSFiles
	Peers []cluster.PeerConfig // the other members, in names order
}

// Members returns the members named names, certificates in a temporary
// directory of t's.
func Members(t testing.TB, names ...string) map[string]Member {
	t.Helper()
	paths, err := certgen.WriteCluster(t.TempDir(), time.Hour, names...)
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	for _, n := range names {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[n] = ln.Addr().String()
		ln.Close()
	}
	out := make(map[string]Member, len(names))
	for _, n := range names {
		m := Member{Name: n, Addr: addrs[n], TLS: transport.TLSFiles(paths[n])}
		for _, o := range names {
			if o != n {
				m.Peers = append(m.Peers, cluster.PeerConfig{Name: o, Addr: addrs[o]})
			}
		}
		out[n] = m
	}
	return out
}
