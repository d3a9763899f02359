package fibrilproc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/server/cluster/certgen"
)

// Cluster is n `fibril serve` processes on loopback, each with its own data
// directory under one directory, joined over mutual TLS with certificates
// from certgen (what `fibril certs` writes). Node i is named n<i+1>.
type Cluster struct {
	Names []string
	Nodes []*Server
	Addrs []string // client addresses, in node order, fixed across restarts
	HTTP  []string // admin listeners (--http): GET /api/cluster names leaders
}

// StartCluster starts n nodes of bin under dir, extra more `fibril serve`
// flags for each, and waits until each has printed its ready line and all
// agree on a metadata leader. On error nothing it started is left running.
func StartCluster(ctx context.Context, bin, dir string, n int, extra ...string) (*Cluster, error) {
	c := &Cluster{}
	for i := range n {
		c.Names = append(c.Names, fmt.Sprintf("n%d", i+1))
	}
	certDir := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		return nil, fmt.Errorf("fibrilproc: %w", err)
	}
	certs, err := certgen.WriteCluster(certDir, 24*time.Hour, c.Names...)
	if err != nil {
		return nil, fmt.Errorf("fibrilproc: cluster certificates: %w", err)
	}
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	links, listens := ports[:n], ports[2*n:]
	c.HTTP = ports[n : 2*n]
	for i, name := range c.Names {
		var peers []string
		for j, o := range c.Names {
			if j != i {
				peers = append(peers, o+"@"+links[j])
			}
		}
		data := filepath.Join(dir, name)
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, fmt.Errorf("fibrilproc: %w", err)
		}
		p := certs[name]
		c.Nodes = append(c.Nodes, &Server{Bin: bin, DataDir: data, Listen: listens[i], Args: []string{
			"--cluster-name", name, "--cluster-listen", links[i], "--cluster-peers", strings.Join(peers, ","),
			"--cluster-ca", p.CA, "--cluster-cert", p.Cert, "--cluster-key", p.Key, "--http", c.HTTP[i],
		}})
		c.Nodes[i].Args = append(c.Nodes[i].Args, extra...)
	}
	// Started together, in case a node's ready line waits for its peers.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = StartServer(ctx, s) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("fibrilproc: starting cluster node %s: %w", c.Names[i], err)
		}
		c.Addrs = append(c.Addrs, c.Nodes[i].Addr)
	}
	if err := c.WaitMetaLeader(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// WaitMetaLeader waits until every node's GET /api/cluster names the same
// leader of the metadata group (before that, TOPIC CREATE is answered
// not_leader), checking every 50 ms until ctx ends.
func (c *Cluster) WaitMetaLeader(ctx context.Context) error {
	hc := &http.Client{Timeout: time.Second}
	var last string
	for {
		leaders := map[string]bool{}
		for _, h := range c.HTTP {
			leaders[metaLeader(ctx, hc, h)] = true
		}
		if len(leaders) == 1 && !leaders[""] {
			return nil
		}
		last = fmt.Sprint(leaders)
		select {
		case <-ctx.Done():
			return fmt.Errorf("fibrilproc: waiting for the cluster's metadata leader (last seen %s): %w", last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// metaLeader returns the node that the admin listener at addr says leads
// the metadata group, or "" when it names none or does not answer.
func metaLeader(ctx context.Context, hc *http.Client, addr string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/cluster", nil)
	if err != nil {
		return ""
	}
	resp, err := hc.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var v struct {
		Nodes []struct {
			Name         string `json:"name"`
			LeaderOfMeta bool   `json:"leader_of_meta"`
		} `json:"nodes"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v) != nil {
		return ""
	}
	for _, n := range v.Nodes {
		if n.LeaderOfMeta {
			return n.Name
		}
	}
	return ""
}

// freePorts returns n loopback addresses nothing listened on a moment ago.
func freePorts(n int) ([]string, error) {
	var out []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("fibrilproc: picking a port: %w", err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// Kill sends node i SIGKILL and waits until the process is gone.
func (c *Cluster) Kill(i int) error {
	if i < 0 || i >= len(c.Nodes) {
		return fmt.Errorf("fibrilproc: no cluster node %d (of %d)", i, len(c.Nodes))
	}
	return c.Nodes[i].Stop(true)
}

// Restart starts node i again on its address and data directory, retrying
// while its port is still taken, until ctx ends.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	if i < 0 || i >= len(c.Nodes) {
		return fmt.Errorf("fibrilproc: no cluster node %d (of %d)", i, len(c.Nodes))
	}
	s := c.Nodes[i]
	s.Listen = c.Addrs[i]
	for {
		err := StartServer(ctx, s)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("fibrilproc: restarting %s: %w", c.Names[i], err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close kills every node.
func (c *Cluster) Close() {
	for _, s := range c.Nodes {
		_ = s.Stop(true)
	}
}
