package main

// Runs against a cluster: --url with several nodes (bench/cluster.sh
// starts them). The clients connect to the node that leads what they use
// (--target leader, the best figure) or to another node (--target follower:
// Fibril forwards to the leader, SPEC.md 11.2):
//
//   - Fibril: partition 0's leader is found after the topic is made, from
//     the nodes' /metrics (--http-urls): one probe message is published
//     through the first node, and the leader is the other node whose
//     fibril_server_in_msgs_total moved (a forwarded PUB arrives on the
//     leader's client port), or the first node when none did. The probe
//     answers not_leader until the partition's group elected a leader, so
//     it is resent until confirmed (bounded by clusterWait). It is then
//     polled and acked on the leader, so the run starts with an empty group.
//     Each node's counter over the run is reported: with --target leader
//     any PUB on another node means the leadership moved during the run.
//   - NATS: the stream's and the durable consumer's leaders (each an R3
//     Raft group of its own) come from their info; the publishers connect
//     to the stream leader, the consumers to the consumer leader.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fibrilmq/fibril/protocol"
)

// clusterWait bounds the wait for a fresh partition's or stream's leader.
const clusterWait = 20 * time.Second

// ClusterStats says how a run against a cluster was placed.
type ClusterStats struct {
	Nodes  []string `json:"nodes"`  // client addresses, as given
	Target string   `json:"target"` // leader | follower
	// Leader is the node leading partition 0 (Fibril) or the stream
	// (NATS); ConsumerLeader the NATS durable consumer's leader.
	Leader         string `json:"leader"`
	ConsumerLeader string `json:"consumer_leader,omitempty"`
	PubNode        string `json:"pub_node"`
	ConNode        string `json:"con_node"`
	// InMsgs (Fibril) is each node's fibril_server_in_msgs_total over the
	// run: PUBs from clients and from other nodes' forwarding.
	InMsgs []int64 `json:"in_msgs,omitempty"`
	// LeaderMoved: the leader at the end is not the one found at setup
	// (NATS: stream or consumer), or (Fibril, --target leader) another node
	// received PUBs during the run.
	LeaderMoved bool `json:"leader_moved"`

	leaderHTTP string                    // Fibril: the leader's admin listener, for the stage scrape
	atEnd      func(ctx context.Context) // fills the end-of-run fields
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// hostOf returns host:port of a nats:// URL (or of a bare host:port).
func hostOf(u string) (string, error) {
	if !strings.Contains(u, "://") {
		u = "nats://" + u
	}
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return "", fmt.Errorf("%w: %q: want nats://host:port", errUsage, u)
	}
	return p.Host, nil
}

// pickNode returns the index to connect to: the leader, or with --target
// follower the first other node.
func pickNode(n, leader int, target string) int {
	if target != "follower" {
		return leader
	}
	return (leader + 1) % n
}

// placeFibril finds partition 0's leader (see the file comment), drains the
// probe and points the driver's clients at the --target node.
func (d *fibrilDriver) placeFibril(ctx context.Context) error {
	nodes, https := d.cfg.clusterAddrs, splitList(d.cfg.HTTPURLs)
	before, err := scrapeInMsgs(ctx, https)
	if err != nil {
		return err
	}
	crc := protocol.NoCRC
	if d.cfg.CRC {
		crc = protocol.ComputeCRC
	}
	probe := protocol.AppendPub(nil, d.cfg.Topic, "", []byte("fibril-bench leader probe"), crc)
	deadline := time.Now().Add(clusterWait)
	for {
		text, err := d.admin.request(probe)
		if err == nil {
			if _, stored, perr := protocol.ParseConfirm([]byte(text)); perr != nil || !stored {
				return fmt.Errorf("leader probe: confirm %q: not stored", text)
			}
			break
		}
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeNotLeader || time.Now().After(deadline) {
			return fmt.Errorf("leader probe via %s: %w", nodes[0], err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	after, err := scrapeInMsgs(ctx, https)
	if err != nil {
		return err
	}
	leader := 0
	for i := 1; i < len(nodes); i++ {
		if after[i] > before[i] {
			if leader != 0 {
				return fmt.Errorf("leader probe: PUBs arrived on %s and %s: cannot tell the leader (other traffic on the cluster?)", nodes[leader], nodes[i])
			}
			leader = i
		}
	}
	// The run's clients and the admin connection (settled() asks the
	// leader, which holds the leases) go to their nodes.
	lc, err := dialWire(ctx, nodes[leader], connMode{fibril: true, crc: d.cfg.CRC})
	if err != nil {
		return err
	}
	d.track(lc)
	d.admin = lc
	if err := drainProbe(lc, d.cfg.Topic, d.cfg.Group); err != nil {
		return err
	}
	target := pickNode(len(nodes), leader, d.cfg.Target)
	d.addr = nodes[target]
	cs := &ClusterStats{Nodes: nodes, Target: d.cfg.Target, Leader: nodes[leader], PubNode: nodes[target],
		ConNode: nodes[target], leaderHTTP: https[leader]}
	start, err := scrapeInMsgs(ctx, https)
	if err != nil {
		return err
	}
	cs.atEnd = func(ctx context.Context) {
		end, err := scrapeInMsgs(ctx, https)
		if err != nil {
			return
		}
		for i := range end {
			cs.InMsgs = append(cs.InMsgs, end[i]-start[i])
			if d.cfg.Target != "follower" && i != leader && end[i] > start[i] {
				cs.LeaderMoved = true
			}
		}
	}
	d.place = cs
	return nil
}

// drainProbe polls the probe message on c and acks it.
func drainProbe(c *wconn, topic, group string) error {
	if err := c.writeFlush(protocol.AppendPoll(nil, topic, group, 1, 5000)); err != nil {
		return err
	}
	var handle []byte
	var done bool
	var rerr error
	h := protocol.HandlerFunc(func(cmd *protocol.Command) error {
		switch cmd.Op {
		case protocol.OpMsg, protocol.OpHMsg:
			handle = append(handle[:0], cmd.Reply...)
		case protocol.OpOK:
			done = true
			return errStop
		case protocol.OpErr:
			rerr, done = fmt.Errorf("%w: '%s'", errServer, cmd.Text), true
			return errStop
		case protocol.OpPing:
			return c.pong()
		}
		return nil
	})
	if err := c.readUntil(h, func() bool { return done }); err != nil && err != errStop {
		return fmt.Errorf("polling the leader probe: %w", err)
	}
	if rerr != nil || handle == nil {
		return fmt.Errorf("polling the leader probe: got no message (%v)", rerr)
	}
	if _, err := c.request(append(append([]byte("ACK "), handle...), "\r\n"...)); err != nil {
		return fmt.Errorf("acking the leader probe: %w", err)
	}
	return nil
}

// scrapeInMsgs reads fibril_server_in_msgs_total from each admin listener.
func scrapeInMsgs(ctx context.Context, bases []string) ([]int64, error) {
	out := make([]int64, len(bases))
	for i, base := range bases {
		v, err := scrapeCounter(ctx, base, "fibril_server_in_msgs_total")
		if err != nil {
			return nil, err
		}
		out[i] = int64(v)
	}
	return out, nil
}

// scrapeCounter reads one unlabelled counter or gauge from base/metrics.
func scrapeCounter(ctx context.Context, base, name string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape %s/metrics: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scrape %s/metrics: %s", base, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("parse %s/metrics: %w", base, err)
	}
	fam := fams[name]
	if fam == nil || len(fam.GetMetric()) != 1 {
		return 0, fmt.Errorf("%s/metrics: no single %s", base, name)
	}
	m := fam.GetMetric()[0]
	if c := m.GetCounter(); c != nil {
		return c.GetValue(), nil
	}
	return m.GetGauge().GetValue(), nil
}

// placeNATS waits for the stream's and the consumer's leaders and points
// the publishers at the stream leader's node, the consumers at the
// consumer leader's (or, with --target follower, at the next node).
func (d *natsDriver) placeNATS(ctx context.Context, js jetstream.JetStream) error {
	nodes := d.cfg.clusterAddrs
	names := make([]string, len(nodes))
	for i, n := range nodes {
		nc, err := d.connect("nats://" + n)
		if err != nil {
			return err
		}
		names[i] = nc.ConnectedServerName()
		nc.Close()
	}
	index := func(name string) int {
		for i, n := range names {
			if n == name {
				return i
			}
		}
		return -1
	}
	leaders := func(ctx context.Context) (stream, cons int, err error) {
		si, err := js.Stream(ctx, natsStream)
		if err != nil {
			return -1, -1, err
		}
		inf, err := si.Info(ctx)
		if err != nil {
			return -1, -1, err
		}
		ci, err := d.cons.Info(ctx)
		if err != nil {
			return -1, -1, err
		}
		stream, cons = -1, -1
		if inf.Cluster != nil {
			stream = index(inf.Cluster.Leader)
		}
		if ci.Cluster != nil {
			cons = index(ci.Cluster.Leader)
		}
		return stream, cons, nil
	}
	deadline := time.Now().Add(clusterWait)
	sl, cl := -1, -1
	for sl < 0 || cl < 0 {
		var err error
		if sl, cl, err = leaders(ctx); err != nil {
			return fmt.Errorf("stream and consumer leaders: %w", err)
		}
		if sl >= 0 && cl >= 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no stream (%d) or consumer (%d) leader among %v within %s", sl, cl, names, clusterWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	pub, con := pickNode(len(nodes), sl, d.cfg.Target), pickNode(len(nodes), cl, d.cfg.Target)
	d.pubURL, d.conURL = "nats://"+nodes[pub], "nats://"+nodes[con]
	cs := &ClusterStats{Nodes: nodes, Target: d.cfg.Target, Leader: nodes[sl], ConsumerLeader: nodes[cl],
		PubNode: nodes[pub], ConNode: nodes[con]}
	cs.atEnd = func(ctx context.Context) {
		if s, c, err := leaders(ctx); err == nil && (s != sl || c != cl) {
			cs.LeaderMoved = true
		}
	}
	d.place = cs
	return nil
}

// manage sends a management command on c. On a cluster it is sent again,
// for up to clusterWait, while it is refused because the metadata group
// has no leader yet (a fresh cluster: not_leader, or internal when the
// node's proposal found no leader); the same change twice is answered +OK
// (SPEC.md 11.2).
func (d *fibrilDriver) manage(c *wconn, frame []byte) (string, error) {
	deadline := time.Now().Add(clusterWait)
	for {
		text, err := c.request(frame)
		var pe *protocol.Error
		if err == nil || len(d.cfg.clusterAddrs) == 0 || !errors.As(err, &pe) ||
			pe.Code != protocol.CodeNotLeader && pe.Code != protocol.CodeInternal || time.Now().After(deadline) {
			return text, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
