package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoNetem reports a kernel without the netem queueing discipline.
var ErrNoNetem = errors.New("netns: this kernel has no netem (sch_netem)")

// cmdTimeout bounds every ip or tc command.
const cmdTimeout = 10 * time.Second

// Available reports why namespaces cannot be made here, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("netns: needs root (euid %d)", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	return nil
}

// Net is one private network: a hub namespace holding a bridge, and node
// namespaces joined to it, addressed 10.77.0.<i>/24 in the order added.
type Net struct {
	prefix string
	hub    string

	mu    sync.Mutex
	nodes []*Node
}

// Node is one namespace on the Net.
type Node struct {
	Name string // as given to Add
	NS   string // the namespace's name (prefix-name)
	IP   string // its address on the bridge
	peer string // the hub side of its veth
	net  *Net
}

// New creates the hub namespace and its bridge. prefix (at most 8
// characters, letters and digits) names every namespace of this Net.
func New(prefix string) (*Net, error) {
	if len(prefix) == 0 || len(prefix) > 8 || strings.ContainsAny(prefix, " -/.") {
		return nil, fmt.Errorf("netns: prefix %q: 1-8 letters or digits", prefix)
	}
	n := &Net{prefix: prefix, hub: prefix + "-hub"}
	if err := ip("netns", "add", n.hub); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "br0", "type", "bridge"},
		{"link", "set", "br0", "up"},
	} {
		if err := n.in(n.hub, args...); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// Add creates a namespace joined to the bridge and returns it.
func (n *Net) Add(name string) (*Node, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	i := len(n.nodes) + 1
	if i > 250 {
		return nil, errors.New("netns: at most 250 nodes on a Net")
	}
	nd := &Node{Name: name, NS: n.prefix + "-" + name, IP: fmt.Sprintf("10.77.0.%d", i), peer: fmt.Sprintf("h%d", i), net: n}
	if err := ip("netns", "add", nd.NS); err != nil {
		return nil, err
	}
	n.nodes = append(n.nodes, nd)
	// The veth is made inside the hub, then one end moved into the node.
	steps := []struct {
		ns   string
		args []string
	}{
		{n.hub, []string{"link", "add", nd.peer, "type", "veth", "peer", "name", "eth0", "netns", nd.NS}},
		{n.hub, []string{"link", "set", nd.peer, "master", "br0"}},
		{n.hub, []string{"link", "set", nd.peer, "up"}},
		{nd.NS, []string{"link", "set", "lo", "up"}},
		{nd.NS, []string{"addr", "add", nd.IP + "/24", "dev", "eth0"}},
		{nd.NS, []string{"link", "set", "eth0", "up"}},
	}
	for _, s := range steps {
		if err := n.in(s.ns, s.args...); err != nil {
			return nil, fmt.Errorf("netns: adding %s: %w", name, err)
		}
	}
	return nd, nil
}

// Isolate takes the node's link down (no traffic in or out); Rejoin
// brings it back.
func (nd *Node) Isolate() error { return nd.net.in(nd.net.hub, "link", "set", nd.peer, "down") }

// Rejoin brings an isolated node's link back up.
func (nd *Node) Rejoin() error { return nd.net.in(nd.net.hub, "link", "set", nd.peer, "up") }

// Partition cuts every node of a off from every node of b (both ways) with
// routes that refuse the other side's addresses; Heal removes them.
func (n *Net) Partition(a, b []*Node) error {
	for _, x := range a {
		for _, y := range b {
			if err := n.in(x.NS, "route", "add", "prohibit", y.IP+"/32"); err != nil {
				return err
			}
			if err := n.in(y.NS, "route", "add", "prohibit", x.IP+"/32"); err != nil {
				return err
			}
		}
	}
	return nil
}

// Heal removes every partition route of every node.
func (n *Net) Heal() error {
	n.mu.Lock()
	nodes := append([]*Node(nil), n.nodes...)
	n.mu.Unlock()
	for _, x := range nodes {
		for _, y := range nodes {
			if x != y {
				_ = n.in(x.NS, "route", "del", "prohibit", y.IP+"/32") // absent routes are fine
			}
		}
	}
	return nil
}

// Netem applies a netem discipline to the node's outgoing traffic, e.g.
// "delay 50ms 10ms loss 1% duplicate 1%"; an empty spec removes it.
func (nd *Node) Netem(spec string) error {
	if spec == "" {
		err := nd.net.in(nd.NS, "qdisc", "del", "dev", "eth0", "root")
		if err != nil && strings.Contains(err.Error(), "No such file") {
			return nil
		}
		return err
	}
	args := append([]string{"qdisc", "replace", "dev", "eth0", "root", "netem"}, strings.Fields(spec)...)
	err := nd.net.in(nd.NS, args...)
	if err != nil && strings.Contains(err.Error(), "qdisc kind is unknown") {
		return ErrNoNetem
	}
	return err
}

// Command returns a command that runs name inside the node's namespace.
func (nd *Node) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", nd.NS, name}, args...)...)
}

// Do runs f on a thread inside the node's namespace, so that sockets f
// opens (net.Listen, net.Dial) belong to it; they stay there after Do
// returns. f must not start goroutines that expect the namespace.
func (nd *Node) Do(f func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: %w", err)
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + nd.NS)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: %w", err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: setns %s: %w", nd.NS, err)
	}
	ferr := f()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays locked and dies with this goroutine rather than
		// serve others from the wrong namespace.
		return errors.Join(ferr, fmt.Errorf("netns: returning from %s: %w", nd.NS, err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// Close deletes every namespace of the Net (their interfaces go with them).
func (n *Net) Close() error {
	n.mu.Lock()
	nodes := n.nodes
	n.nodes = nil
	n.mu.Unlock()
	var errs []error
	for _, nd := range nodes {
		if err := ip("netns", "del", nd.NS); err != nil {
			errs = append(errs, err)
		}
	}
	if err := ip("netns", "del", n.hub); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// in runs `ip args...` (or tc for qdisc) inside namespace ns.
func (n *Net) in(ns string, args ...string) error {
	if args[0] == "qdisc" {
		return run("ip", append([]string{"netns", "exec", ns, "tc"}, args...)...)
	}
	return ip(append([]string{"-n", ns}, args...)...)
}

func ip(args ...string) error { return run("ip", args...) }

func run(name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
