package server

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/cluster"
	"github.com/fibrilmq/fibril/server/cluster/certgen"
	clustertransport "github.com/fibrilmq/fibril/server/cluster/transport"
)

// startCluster runs three servers in this process, each a node of one
// cluster over mutual TLS on loopback, with users (permUsers) when
// users is set; mutate, if given, changes each node's options last.
func startCluster(t *testing.T, users bool, mutate ...func(*Options)) []*Server {
	t.Helper()
	names := []string{"n1", "n2", "n3"}
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
	var srvs []*Server
	for _, n := range names {
		var peers []cluster.PeerConfig
		for _, o := range names {
			if o != n {
				peers = append(peers, cluster.PeerConfig{Name: o, Addr: addrs[o]})
			}
		}
		srvs = append(srvs, startServer(t, func(o *Options) {
			o.NoBroker = false
			o.Engine.SegmentSize, o.Engine.EventSegmentSize = 4<<20, 1<<20
			o.Cluster = &ClusterOptions{Name: n, Listen: addrs[n], Peers: peers, TLS: clustertransport.TLSFiles(paths[n]),
				Tick: 20 * time.Millisecond, ElectionTicks: 10}
			if users {
				o.Users = permUsers(t)
			}
			for _, m := range mutate {
				m(o)
			}
		}))
	}
	for _, s := range srvs {
		waitFor(t, 30*time.Second, "every node announced", func() bool { return len(s.connectURLs()) == 3 })
	}
	return srvs
}

// untilOK sends cmd on w until it is answered re (retrying while the
// answer is not_leader, an election under way), and returns the answer.
func untilOK(t *testing.T, w *wireConn, cmd, re string) string {
	t.Helper()
	for range 300 {
		w.send(cmd)
		l := w.expect(`^(\+OK|-ERR)`)
		if regexp.MustCompile(re).MatchString(l) {
			return l
		}
		if !strings.Contains(l, "not_leader") && !strings.Contains(l, "metacat") {
			t.Fatalf("%q answered %q, want %s", cmd, l, re)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%q never answered %s", cmd, re)
	return ""
}

// TestClusterAnyNodeTakesPublishesAndSettles: a topic made on one node is
// on all; a publish on any node is confirmed (forwarded to the leader),
// the leader delivers them all, and an ack sent to a node that does not
// lead the partition is forwarded and holds.
func TestClusterAnyNodeTakesPublishesAndSettles(t *testing.T) {
	srvs := startCluster(t, false)
	conns := make([]*wireConn, len(srvs))
	for i, s := range srvs {
		conns[i] = fibrilConn(t, s, "")
	}
	untilOK(t, conns[0], "TOPIC CREATE jobs\r\n", `^\+OK \{`)
	untilOK(t, conns[1], "GROUP CREATE jobs w {\"lease_ms\":60000}\r\n", `^\+OK \{`)
	const per = 5
	for i, w := range conns {
		for k := range per {
			body := fmt.Sprintf("n%d-%d", i, k)
			untilOK(t, w, fmt.Sprintf("PUB jobs - %d\r\n%s\r\n", len(body), body), `^\+OK 0:\d+$`)
		}
	}
	// The leader is the node whose POLL is not answered not_leader.
	var lead int
	var handles []string
	got := map[string]bool{}
	waitFor(t, 30*time.Second, "a node delivering", func() bool {
		for i, w := range conns {
			w.send("POLL jobs w 100\r\n")
			for {
				l := w.expect(`^(MSG|\+OK|-ERR)`)
				if strings.HasPrefix(l, "MSG") {
					f := strings.Fields(l)
					handles = append(handles, f[3])
					line, err := w.line()
					if err != nil {
						t.Fatal(err)
					}
					got[line] = true
					continue
				}
				if strings.HasPrefix(l, "+OK") && len(got) > 0 {
					lead = i
					return true
				}
				break
			}
		}
		return false
	})
	if len(got) != per*len(conns) {
		t.Fatalf("delivered %d, want %d: %v", len(got), per*len(conns), got)
	}
	other := conns[(lead+1)%len(conns)]
	other.send("ACK " + strings.Join(handles, " ") + "\r\n")
	other.expect(`^\+OK$`)
	conns[lead].send("POLL jobs w 100\r\n")
	conns[lead].expect(`^\+OK 0$`)
}

// TestClusterForwardKeepsPermissions: a forwarded command runs as its
// user: a publish the user may not make is refused where it was sent, and
// a delivery leased to one user cannot be acked by another through a
// node that forwards it.
func TestClusterForwardKeepsPermissions(t *testing.T) {
	srvs := startCluster(t, true)
	root := make([]*wireConn, len(srvs))
	for i, s := range srvs {
		root[i] = loginAs(t, s, "root")
	}
	untilOK(t, root[0], "TOPIC CREATE orders\r\n", `^\+OK \{`)
	untilOK(t, root[0], "GROUP CREATE orders w {\"lease_ms\":60000}\r\n", `^\+OK \{`)
	for _, s := range srvs {
		thief := loginAs(t, s, "thief")
		thief.send("PUB orders - 2\r\nhi\r\n")
		thief.expect(deniedRe)
	}
	untilOK(t, root[1], "PUB orders - 2\r\nhi\r\n", `^\+OK 0:1$`)
	var handle string
	lead := -1
	waitFor(t, 30*time.Second, "the leader delivering", func() bool {
		for i, s := range srvs {
			w := loginAs(t, s, "orders")
			w.send("POLL orders w 1\r\n")
			l := w.expect(`^(MSG|\+OK|-ERR)`)
			if strings.HasPrefix(l, "MSG") {
				handle, lead = strings.Fields(l)[3], i
				return true
			}
		}
		return false
	})
	if _, err := protocol.ParseHandle([]byte(handle)); err != nil {
		t.Fatal(err)
	}
	peer := loginAs(t, srvs[(lead+1)%3], "peer") // may consume orders, did not lease it
	peer.send("ACK " + handle + "\r\n")
	peer.expect(`^-ERR 'permission_denied .*another principal`)
	owner := loginAs(t, srvs[(lead+2)%3], "orders")
	owner.send("ACK " + handle + "\r\n")
	owner.expect(`^\+OK$`)
}
