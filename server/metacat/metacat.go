// Package metacat keeps a broker's catalog (topics, groups, their
// settings and pauses) in a cluster's metadata raft group, so every node
// holds the same catalog with the same ids, and records where each node
// serves clients.
//
// # What it owns
//
//   - Catalog, the broker's broker.CatalogLog: Propose puts a catalog
//     change in an entry of the metadata group and waits (bounded by
//     Config.Timeout) until this node applied it, then returns what the
//     apply gave (the same refusal on every node).
//   - Catalog.StateMachine, the group's cluster.StateMachine: each
//     committed catalog entry goes to broker.ApplyCatalog in index order;
//     Applied is the broker's CatalogIndex (durable in its catalog), so a
//     restart never applies a change twice; snapshots are the broker's
//     catalog and the node records (RestoreCatalog on a node that fell
//     behind the log's compaction).
//   - Node records: each node announces its client address (Announce);
//     Nodes lists them, for INFO's connect_urls and for the nodes'
//     listings.
//
// # What it must never do
//
//   - Answer a proposal before this node applied it, or report a change
//     refused that every node applied (results are only the apply's).
//   - Apply a catalog entry out of order or after an apply failed for a
//     reason of this node's own (broker.ErrCatalogApply): the group stops
//     (the error is returned to it) rather than diverge.
//   - Hold unbounded waiters: at most Config.MaxWaiting proposals wait.
//
// # Caveats
//
//   - Entries carry the proposing node's name and a number; a waiter
//     whose proposal is applied after its timeout finds nothing (the
//     outcome was reported unknown).
//   - Node records and empty entries do not move the broker's index: a
//     restart applies again those after it (they are idempotent), and
//     knows those before it from Config.Dir's nodes.json (nodes.go).
package metacat

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/cluster"
)

// Errors of the replicated catalog.
var (
	// ErrNotReady: the metadata group is not open yet (the node starts).
	// Retriable.
	ErrNotReady = errors.New("metacat: the cluster's catalog is not open yet")
	// ErrTimeout: the change was not applied here within Config.Timeout
	// (no quorum, an election): its outcome is unknown. Retriable; a
	// create retried finds the topic if the first one was applied.
	ErrTimeout = errors.New("metacat: catalog change not applied in time, outcome unknown")
	// ErrBusy: Config.MaxWaiting proposals wait already. Retriable.
	ErrBusy = errors.New("metacat: too many catalog changes waiting")
)

// Config describes a node's replicated catalog.
type Config struct {
	// Node is this node's name (cluster.NodeConfig.Name).
	Node string
	// Timeout bounds Propose's wait for its change to be applied here
	// (default 10 s).
	Timeout time.Duration
	// MaxWaiting bounds the proposals waiting at once (default 1024).
	MaxWaiting int
	// OnNodes is called (on the apply goroutine, not blocking) when the
	// node records change, and by New with the records kept in Dir.
	OnNodes func(map[string]NodeInfo)
	// Dir keeps the node records (nodes.json), so a restarted node knows
	// those applied before its catalog index, which the group does not
	// apply again. Empty: in memory only.
	Dir string
}

// NodeInfo is what a node announced of itself.
type NodeInfo struct {
	// Client is the host:port the node serves clients on.
	Client string `json:"client"`
	// Forward is the token another node presents to forward commands
	// there (SPEC.md 11.2); a secret of the cluster's, never shown to
	// clients.
	Forward string `json:"forward,omitempty"`
}

// Entry tags (the first byte of an entry).
const (
	tagChange = 'C' // a catalog change: tag, proposer name, 0, number (8 bytes), the change
	tagNode   = 'N' // a node record: tag, JSON {"name":..,"info":{..}}
)

// Catalog is one node's replicated catalog. Its methods are safe for
// concurrent use.
type Catalog struct {
	cfg   Config
	life  uint64 // this process's proposals' numbers start from it
	next  atomic.Uint64
	b     atomic.Pointer[broker.Broker]
	group atomic.Pointer[cluster.Group]

	mu      sync.Mutex
	waiting map[uint64]chan broker.CatalogResult
	nodes   map[string]NodeInfo
}

// New returns the catalog of a node; Attach gives it its broker and Open
// its group.
func New(cfg Config) (*Catalog, error) {
	if cfg.Node == "" {
		return nil, errors.New("metacat: a node name is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.MaxWaiting <= 0 {
		cfg.MaxWaiting = 1024
	}
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("metacat: %w", err)
	}
	// The top bit clear and the low 32 bits free: numbers of one life
	// never meet another's.
	c := &Catalog{cfg: cfg, life: binary.LittleEndian.Uint64(seed[:]) &^ (1<<63 | 1<<32 - 1),
		waiting: map[uint64]chan broker.CatalogResult{}, nodes: map[string]NodeInfo{}}
	if cfg.Dir != "" {
		nodes, err := readNodes(cfg.Dir)
		if err != nil {
			return nil, err
		}
		maps.Copy(c.nodes, nodes)
		if len(nodes) > 0 && cfg.OnNodes != nil {
			cfg.OnNodes(maps.Clone(nodes))
		}
	}
	return c, nil
}

// Attach gives the catalog its broker (opened with Options.Catalog set
// to c), before the metadata group opens.
func (c *Catalog) Attach(b *broker.Broker) { c.b.Store(b) }

// Serve gives the catalog the open metadata group it proposes to.
func (c *Catalog) Serve(g *cluster.Group) { c.group.Store(g) }

// Propose implements broker.CatalogLog.
func (c *Catalog) Propose(op []byte) (any, error) {
	g := c.group.Load()
	if g == nil {
		return nil, ErrNotReady
	}
	n := c.life + c.next.Add(1)
	ch := make(chan broker.CatalogResult, 1)
	c.mu.Lock()
	if len(c.waiting) >= c.cfg.MaxWaiting {
		c.mu.Unlock()
		return nil, ErrBusy
	}
	c.waiting[n] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiting, n)
		c.mu.Unlock()
	}()
	entry := make([]byte, 0, 2+len(c.cfg.Node)+8+len(op))
	entry = append(entry, tagChange)
	entry = append(entry, c.cfg.Node...)
	entry = append(entry, 0)
	entry = binary.LittleEndian.AppendUint64(entry, n)
	entry = append(entry, op...)
	ctx, cancel := contextWithTimeout(c.cfg.Timeout)
	defer cancel()
	if _, err := g.Propose(ctx, entry); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (%v)", ErrTimeout, err)
		}
		return nil, fmt.Errorf("metacat: propose a catalog change: %w", err)
	}
	select { // Propose returned once applied here: the result is in ch
	case r := <-ch:
		return r, nil
	default:
		return nil, fmt.Errorf("%w: applied without a result (replayed?)", ErrTimeout)
	}
}

// Announce records this node's client address in the group (the nodes'
// listing, connect_urls). It returns once applied here.
func (c *Catalog) Announce(info NodeInfo) error {
	g := c.group.Load()
	if g == nil {
		return ErrNotReady
	}
	rec, err := json.Marshal(struct {
		Name string   `json:"name"`
		Info NodeInfo `json:"info"`
	}{c.cfg.Node, info})
	if err != nil {
		return err
	}
	ctx, cancel := contextWithTimeout(c.cfg.Timeout)
	defer cancel()
	if _, err := g.Propose(ctx, append([]byte{tagNode}, rec...)); err != nil {
		return fmt.Errorf("metacat: announce node %s: %w", c.cfg.Node, err)
	}
	return nil
}

// Nodes returns the node records applied here.
func (c *Catalog) Nodes() map[string]NodeInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.nodes)
}

// ClientURLs returns the announced client addresses, sorted by node name.
func (c *Catalog) ClientURLs() []string {
	nodes := c.Nodes()
	names := slices.Sorted(maps.Keys(nodes))
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, nodes[n].Client)
	}
	return out
}

// StateMachine returns the metadata group's state machine.
func (c *Catalog) StateMachine() cluster.StateMachine { return (*machine)(c) }
