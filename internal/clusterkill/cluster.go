package clusterkill

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/fibrilmq/fibril/conformance/fibrilproc"
)

// cluster is the run's `fibril serve` processes (fibrilproc.Cluster:
// loopback, a data directory each, mutual TLS with certgen's
// certificates) and what the run does to them.
type cluster struct {
	*fibrilproc.Cluster
}

// startCluster starts n nodes (3 or 5) of bin under dir and waits until
// each has printed its ready line; extra are more `fibril serve` flags
// for every node.
func startCluster(ctx context.Context, bin, dir string, n int, extra ...string) (*cluster, error) {
	c, err := fibrilproc.StartCluster(ctx, bin, dir, n, extra...)
	if err != nil {
		return nil, fmt.Errorf("clusterkill: %w", err)
	}
	return &cluster{c}, nil
}

// kill sends node i SIGKILL and waits until the process is gone.
func (c *cluster) kill(i int) error { return c.Kill(i) }

// stop ends node i gracefully (SIGTERM, SIGKILL after 5 s) and waits
// until the process is gone.
func (c *cluster) stop(i int) error { return c.Nodes[i].Stop(false) }

// restart starts node i again on its address and data directory,
// retrying while its port is still taken, until ctx ends.
func (c *cluster) restart(ctx context.Context, i int) error { return c.Restart(ctx, i) }

// logs returns the last lines of every node's stderr, each under its
// name, leaving out the warnings of failed forwards (one per publish
// while a leader is down).
func (c *cluster) logs() string {
	const keep = 40
	var b strings.Builder
	for i, s := range c.Nodes {
		var lines []string
		skipped := 0
		for l := range strings.Lines(s.Logs()) {
			if strings.Contains(l, "WARN forwarding to") {
				skipped++
				continue
			}
			lines = append(lines, l)
		}
		fmt.Fprintf(&b, "=== %s (%d forwarding warnings left out)\n%s\n", c.Names[i], skipped, strings.Join(lines[max(0, len(lines)-keep):], ""))
	}
	return b.String()
}

// close kills every node.
func (c *cluster) close() { c.Close() }

// leaderOf asks the live nodes' admin listeners (GET /api/cluster) which
// node leads partition part of topic, and returns its index; ok is false
// while no live node names one.
func (c *cluster) leaderOf(topic string, part int, live func(int) bool) (int, bool) {
	hc := &http.Client{Timeout: time.Second}
	for i := range c.Nodes {
		if !live(i) {
			continue
		}
		resp, err := hc.Get("http://" + c.HTTP[i] + "/api/cluster")
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
				for j, name := range c.Names {
					if name == p.Leader && live(j) {
						return j, true
					}
				}
			}
		}
	}
	return 0, false
}
