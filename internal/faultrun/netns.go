package faultrun

import (
	"context"
	"path/filepath"

	"github.com/fibrilmq/fibril/internal/netns"
)

// Namespaces is a run's network: the node in a namespace of its own and the
// clients in another, joined by a bridge (internal/netns). Set a Config's
// StartNodes and Within from it to make Isolate usable.
type Namespaces struct {
	net     *netns.Net
	clients *netns.Node
	bin     string
}

// NewNamespaces creates the network (prefix names its namespaces: 1-8
// letters or digits) for nodes running bin.
func NewNamespaces(prefix, bin string) (*Namespaces, error) {
	n, err := netns.New(prefix)
	if err != nil {
		return nil, err
	}
	cl, err := n.Add("cl")
	if err != nil {
		n.Close()
		return nil, err
	}
	return &Namespaces{net: n, clients: cl, bin: bin}, nil
}

// StartNodes starts one node in its own namespace (Config.StartNodes).
func (s *Namespaces) StartNodes(ctx context.Context, dir string, powerCut bool) ([]Node, error) {
	nd, err := s.net.Add("n1")
	if err != nil {
		return nil, err
	}
	n, err := StartProcNodeIn(ctx, "n1", s.bin, filepath.Join(dir, "n1"), powerCut, nd)
	if err != nil {
		return nil, err
	}
	return []Node{n}, nil
}

// Within runs dial in the clients' namespace (Config.Within).
func (s *Namespaces) Within(dial func() error) error { return s.clients.Do(dial) }

// Close deletes every namespace (after the run has closed its nodes).
func (s *Namespaces) Close() error { return s.net.Close() }
