package faultrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/internal/netns"
	"github.com/fibrilmq/fibril/server/cluster/certgen"
)

// Ports every cluster node uses on its own address (each node has a
// namespace, so they never collide).
const (
	clusterClientPort = 4222
	clusterLinkPort   = 7422
	clusterAdmin      = "127.0.0.1:8222" // inside the node's namespace only
)

// Cluster is a cluster of 3 or 5 `fibril serve` nodes, each in a network
// namespace of its own, joined over mutual TLS (certificates from
// certgen), with the clients in one more namespace, all on one bridge
// (internal/netns). Set a Config's StartNodes and Within from it, and
// Replicated. Its nodes are ClusterNodes, on which the network faults
// (Isolate, Split, Bridge, Netem) work.
type Cluster struct {
	net     *netns.Net
	clients *netns.Node
	bin     string
	size    int
	netem   bool // the kernel has sch_netem

	mu    sync.Mutex
	nodes []*ClusterNode
	turn  int // which partition's leader Leader looks for next
}

// ClusterNode is one node of a Cluster: a ProcNode in its namespace.
type ClusterNode struct {
	*ProcNode
	c  *Cluster
	nd *netns.Node
}

// NewCluster creates the network (prefix names its namespaces: 1-8
// letters or digits) for size nodes (3 or 5) running bin.
func NewCluster(prefix, bin string, size int) (*Cluster, error) {
	if size != 3 && size != 5 {
		return nil, fmt.Errorf("faultrun: a cluster has 3 or 5 nodes, not %d", size)
	}
	ns, err := NewNamespaces(prefix, bin) // the network and the clients' namespace
	if err != nil {
		return nil, err
	}
	c := &Cluster{net: ns.net, clients: ns.clients, bin: bin, size: size}
	// Probe netem once, on the clients' link (nothing runs there yet).
	if err := c.clients.Netem("delay 1ms"); err == nil {
		c.netem = true
		_ = c.clients.Netem("")
	}
	return c, nil
}

// Netem reports whether the kernel has netem (the Netem faults need it).
func (c *Cluster) Netem() bool { return c.netem }

// StartNodes starts the cluster's nodes (Config.StartNodes), all at
// once, and returns when each has printed its ready line.
func (c *Cluster) StartNodes(ctx context.Context, dir string, powerCut bool) (nodes []Node, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.nodes) > 0 {
		return nil, errors.New("faultrun: the cluster's nodes are started already")
	}
	var names []string
	var nds []*netns.Node
	for i := range c.size {
		name := fmt.Sprintf("n%d", i+1)
		nd, err := c.net.Add(name)
		if err != nil {
			return nil, err
		}
		names, nds = append(names, name), append(nds, nd)
	}
	certDir := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		return nil, fmt.Errorf("faultrun: %w", err)
	}
	certs, err := certgen.WriteCluster(certDir, 24*time.Hour, names...)
	if err != nil {
		return nil, fmt.Errorf("faultrun: cluster certificates: %w", err)
	}
	started := make([]*ClusterNode, c.size)
	errs := make([]error, c.size)
	var wg sync.WaitGroup
	for i, name := range names {
		var peers []string
		for j, o := range names {
			if j != i {
				peers = append(peers, fmt.Sprintf("%s@%s:%d", o, nds[j].IP, clusterLinkPort))
			}
		}
		p := certs[name]
		args := []string{
			"--cluster-name", name, "--cluster-listen", fmt.Sprintf("%s:%d", nds[i].IP, clusterLinkPort),
			"--cluster-peers", strings.Join(peers, ","),
			"--cluster-ca", p.CA, "--cluster-cert", p.Cert, "--cluster-key", p.Key, "--http", clusterAdmin,
		}
		listen := fmt.Sprintf("%s:%d", nds[i].IP, clusterClientPort)
		wg.Add(1)
		go func() {
			defer wg.Done()
			pn, err := startProcNode(ctx, name, c.bin, filepath.Join(dir, name), powerCut, nds[i], listen, args)
			if err != nil {
				errs[i] = err
				return
			}
			started[i] = &ClusterNode{ProcNode: pn, c: c, nd: nds[i]}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, n := range started {
			if n != nil {
				_ = n.Close()
			}
		}
		return nil, err
	}
	c.nodes = started
	for _, n := range started {
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// Within runs dial in the clients' namespace (Config.Within).
func (c *Cluster) Within(dial func() error) error { return c.clients.Do(dial) }

// Close deletes every namespace (after the run has closed its nodes; a
// node still running is killed first).
func (c *Cluster) Close() error {
	c.mu.Lock()
	nodes := c.nodes
	c.nodes = nil
	c.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		if err := n.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, c.net.Close())...)
}

// clusterView is what Leader reads of GET /api/cluster.
type clusterView struct {
	Partitions []struct {
		Topic     string `json:"topic"`
		Partition int    `json:"partition"`
		Leader    string `json:"leader"`
	} `json:"partitions"`
}

// view asks n's admin listener (inside n's namespace) for its view of
// the cluster, within a second.
func (n *ClusterNode) view() (*clusterView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var conn net.Conn
	err := n.nd.Do(func() (err error) {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", clusterAdmin)
		return err
	})
	if err != nil {
		return nil, err
	}
	used := false
	hc := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		if used {
			return nil, errors.New("faultrun: one connection per view")
		}
		used = true
		return conn, nil
	}, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+clusterAdmin+"/api/cluster", nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		conn.Close()
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("faultrun: %s: GET /api/cluster: %s", n.Name(), resp.Status)
	}
	var v clusterView
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v); err != nil {
		return nil, fmt.Errorf("faultrun: %s: GET /api/cluster: %w", n.Name(), err)
	}
	return &v, nil
}

// Leader returns the node that leads a partition of Topic as the nodes'
// GET /api/cluster names it (each call looks at the next partition in
// turn), or false when no node answers with one.
func (c *Cluster) Leader() (*ClusterNode, bool) {
	c.mu.Lock()
	nodes := c.nodes
	turn := c.turn
	c.turn++
	c.mu.Unlock()
	for _, n := range nodes {
		v, err := n.view()
		if err != nil {
			continue
		}
		var leaders []string
		for _, p := range v.Partitions {
			if p.Topic == Topic && p.Leader != "" {
				leaders = append(leaders, p.Leader)
			}
		}
		if len(leaders) == 0 {
			continue
		}
		want := leaders[turn%len(leaders)]
		for _, o := range nodes {
			if o.Name() == want {
				return o, true
			}
		}
	}
	return nil, false
}

// others returns the cluster's nodes but those given, in order.
func (c *Cluster) others(not ...*ClusterNode) []*ClusterNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*ClusterNode
	for _, n := range c.nodes {
		skip := false
		for _, x := range not {
			skip = skip || x == n
		}
		if !skip {
			out = append(out, n)
		}
	}
	return out
}

// partition cuts every node of a off from every node of b (clients still
// reach all of them).
func (c *Cluster) partition(a, b []*ClusterNode) error {
	ns := func(l []*ClusterNode) (out []*netns.Node) {
		for _, n := range l {
			out = append(out, n.nd)
		}
		return out
	}
	return c.net.Partition(ns(a), ns(b))
}

// heal removes every partition.
func (c *Cluster) heal() error { return c.net.Heal() }

// names lists nodes' names, for fault ops.
func names(l []*ClusterNode) string {
	var s []string
	for _, n := range l {
		s = append(s, n.Name())
	}
	return strings.Join(s, ",")
}
