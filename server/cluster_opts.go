package server

// A server as one node of a cluster (README "Running a cluster"): the
// engine runs under package clusternode, its catalog and partitions
// replicated on every node; INFO's connect_urls lists the nodes' client
// addresses as they announce them.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/cluster"
	clustertransport "github.com/fibrilmq/fibril/server/cluster/transport"
	"github.com/fibrilmq/fibril/server/clusternode"
	"github.com/fibrilmq/fibril/server/forward"
	"github.com/fibrilmq/fibril/server/metacat"
)

// ClusterOptions make the server one node of a cluster; nil (the
// default) runs a single node.
type ClusterOptions struct {
	// Name is this node's name, a DNS label its certificate carries.
	Name string
	// Listen is the cluster listen address (host:port).
	Listen string
	// Peers are the other nodes, each name@host:port of its cluster
	// address; the cluster has 3 or 5 nodes, each started with the same
	// set.
	Peers []cluster.PeerConfig
	// TLS names this node's certificate and key and the cluster's CA
	// (mutual TLS on every cluster link; required).
	TLS clustertransport.TLSFiles
	// Tick and ElectionTicks are raft's timing (defaults 100 ms, 10).
	Tick          time.Duration
	ElectionTicks int
}

func (c *ClusterOptions) validate() error {
	if c.Name == "" || c.Listen == "" {
		return fmt.Errorf("%w: Cluster needs Name and Listen", ErrInvalidOptions)
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("%w: Cluster.Listen %q: %v", ErrInvalidOptions, c.Listen, err)
	}
	if c.TLS.CA == "" || c.TLS.Cert == "" || c.TLS.Key == "" {
		return fmt.Errorf("%w: Cluster.TLS needs the CA, the node's certificate and its key (fibril certs makes them)", ErrInvalidOptions)
	}
	if n := len(c.Peers) + 1; n != 3 && n != 5 {
		return fmt.Errorf("%w: a cluster has 3 or 5 nodes, Cluster names %d", ErrInvalidOptions, n)
	}
	return nil
}

// clusterState is the server's part of a cluster node.
type clusterState struct {
	node     *clusternode.Node
	token    string                         // what a node forwarding here presents (SPEC.md 11.2), fresh at each start
	urls     atomic.Pointer[[]string]       // the nodes' client addresses (connect_urls)
	targets  atomic.Pointer[forwardTargets] // where to forward, by raft ID (forwarding.go)
	interest *interest                      // plain subscriptions carried to the other nodes (interest.go)
	guesses  leaderGuesses                  // the holder answering for each partition held elsewhere (forward_holders.go)
}

// openClusterNode opens the engine as a cluster node in DataDir.
func (s *Server) openClusterNode(engine clusternode.Config) (*clusternode.Node, error) {
	c := s.opts.Cluster
	var tok [24]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, fmt.Errorf("server: forwarding token: %w", err)
	}
	cs := &clusterState{token: hex.EncodeToString(tok[:])}
	engine.Name, engine.Listen, engine.Peers, engine.TLS = c.Name, c.Listen, c.Peers, c.TLS
	engine.Dir, engine.Tick, engine.ElectionTicks = s.opts.DataDir, c.Tick, c.ElectionTicks
	engine.OnNodes = func(nodes map[string]metacat.NodeInfo) {
		urls := make([]string, 0, len(nodes))
		for _, name := range slices.Sorted(maps.Keys(nodes)) {
			urls = append(urls, nodes[name].Client)
		}
		cs.urls.Store(&urls)
		tm := targetsOf(nodes)
		cs.targets.Store(&tm)
	}
	n, err := clusternode.Open(engine)
	if err != nil {
		return nil, err
	}
	cs.node = n
	s.forwards = forward.New(forward.Options{Name: "fibril-forward " + c.Name, Window: s.opts.MaxUnconfirmed * forwardWindow, MaxLine: s.opts.MaxControlLine + protocol.DefaultMaxJSONLine,
		Logf: func(f string, a ...any) { s.log.Warn(fmt.Sprintf(f, a...)) }})
	cs.interest = newInterest(s)
	s.cluster = cs
	cs.interest.start() // after s.cluster and s.forwards: its loop reads them
	return n, nil
}

// connectURLs is INFO's connect_urls: the option's, else the cluster's.
func (s *Server) connectURLs() []string {
	if len(s.opts.ConnectURLs) > 0 || s.cluster == nil {
		return s.opts.ConnectURLs
	}
	if u := s.cluster.urls.Load(); u != nil {
		return *u
	}
	return nil
}

// handOff moves the leadership of every raft group this node leads to a
// caught-up follower before a graceful stop (bounded by ShutdownTimeout),
// so a rolling restart waits for no election: clients keep being served,
// through forwarding, while the node drains. A failure is logged, and the
// stop goes on (the others elect a leader after the election timeout).
func (s *Server) handOff() {
	if s.cluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	if err := s.cluster.node.Raft().TransferLeadership(ctx); err != nil {
		s.log.Warn("shutdown: leadership not handed off; the other nodes elect a leader after the election timeout", "err", err)
	}
}
