package clusterkill

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

	"github.com/fibrilmq/fibril/conformance/fibrilproc"
	"github.com/fibrilmq/fibril/server/cluster/certgen"
)

// cluster is three `fibril serve` processes on loopback, each with its own
// data directory, joined over mutual TLS with certificates from certgen.
type cluster struct {
	names []string
	nodes []*fibrilproc.Server

	addrs []string // client addresses, fixed across restarts
	https []string // admin listeners (GET /api/cluster names the leaders)
}

// freePorts returns n loopback addresses nothing listens on right now.
func freePorts(n int) ([]string, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("clusterkill: picking a port: %w", err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// startCluster starts n nodes (3 or 5) of bin under dir and waits until
// each has printed its ready line; extra are more `fibril serve` flags
// for every node.
func startCluster(ctx context.Context, bin, dir string, n int, extra ...string) (*cluster, error) {
	c := &cluster{}
	for i := range n {
		c.names = append(c.names, fmt.Sprintf("n%d", i+1))
	}
	certDir := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		return nil, fmt.Errorf("clusterkill: %w", err)
	}
	certs, err := certgen.WriteCluster(certDir, 24*time.Hour, c.names...)
	if err != nil {
		return nil, fmt.Errorf("clusterkill: certificates: %w", err)
	}
	links, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	links, c.https = links[:n], links[n:]
	for i, name := range c.names {
		var peers []string
		for j, o := range c.names {
			if j != i {
				peers = append(peers, o+"@"+links[j])
			}
		}
		data := filepath.Join(dir, name)
		if err := os.MkdirAll(data, 0o755); err != nil {
			c.close()
			return nil, fmt.Errorf("clusterkill: %w", err)
		}
		p := certs[name]
		c.nodes = append(c.nodes, &fibrilproc.Server{Bin: bin, DataDir: data, Args: []string{
			"--cluster-name", name, "--cluster-listen", links[i], "--cluster-peers", strings.Join(peers, ","),
			"--cluster-ca", p.CA, "--cluster-cert", p.Cert, "--cluster-key", p.Key, "--http", c.https[i],
		}})
		c.nodes[i].Args = append(c.nodes[i].Args, extra...)
	}
	// Started together, in case a node's ready line waits for its peers.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = fibrilproc.StartServer(ctx, s) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			c.close()
			return nil, fmt.Errorf("clusterkill: starting %s: %w", c.names[i], err)
		}
		c.addrs = append(c.addrs, c.nodes[i].Addr)
	}
	return c, nil
}

// addr returns node i's client address (the same across restarts).
func (c *cluster) addr(i int) string { return c.addrs[i] }

// kill sends node i SIGKILL and waits until the process is gone.
func (c *cluster) kill(i int) error { return c.nodes[i].Stop(true) }

// stop ends node i gracefully (SIGTERM, SIGKILL after 5 s) and waits
// until the process is gone.
func (c *cluster) stop(i int) error { return c.nodes[i].Stop(false) }

// restart starts node i again on its address and data directory.
// It retries while the process exits before it is ready (its port still
// taken) until ctx ends, and then returns the last attempt's error.
func (c *cluster) restart(ctx context.Context, i int) error {
	s := c.nodes[i]
	s.Listen = c.addrs[i]
	var last error
	for {
		err := fibrilproc.StartServer(ctx, s)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("clusterkill: restarting %s: %w (the attempt before: %v)", c.names[i], err, last)
		}
		last = err
		pause(ctx, 100*time.Millisecond)
	}
}

// logs returns the last lines of every node's stderr, each under its
// name, leaving out the warnings of failed forwards (one per publish
// while a leader is down).
func (c *cluster) logs() string {
	const keep = 40
	var b strings.Builder
	for i, s := range c.nodes {
		var lines []string
		skipped := 0
		for l := range strings.Lines(s.Logs()) {
			if strings.Contains(l, "WARN forwarding to") {
				skipped++
				continue
			}
			lines = append(lines, l)
		}
		fmt.Fprintf(&b, "=== %s (%d forwarding warnings left out)\n%s\n", c.names[i], skipped, strings.Join(lines[max(0, len(lines)-keep):], ""))
	}
	return b.String()
}

// close kills every node.
func (c *cluster) close() {
	for _, s := range c.nodes {
		_ = s.Stop(true)
	}
}

// leaderOf asks the live nodes' admin listeners (GET /api/cluster) which
// node leads partition part of topic, and returns its index; ok is false
// while no live node names one.
func (c *cluster) leaderOf(topic string, part int, live func(int) bool) (int, bool) {
	hc := &http.Client{Timeout: time.Second}
	for i := range c.nodes {
		if !live(i) {
			continue
		}
		resp, err := hc.Get("http://" + c.https[i] + "/api/cluster")
		if err != nil {
			continue
		}
		var v struct {
			Partitions []struct {
				Topic     string `json:"topic"`
				Partition int    `json:"partition"`
				Leader    string `json:"leader"`
			} `json:"partitions"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v)
		resp.Body.Close()
		if err != nil {
			continue
		}
		for _, p := range v.Partitions {
			if p.Topic == topic && p.Partition == part && p.Leader != "" {
				for j, name := range c.names {
					if name == p.Leader && live(j) {
						return j, true
					}
				}
			}
		}
	}
	return 0, false
}
