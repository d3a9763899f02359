package cluster

import (
	"errors"
	"fmt"
	"os"
	"slices"
)

// ErrGroupExists is returned by AddGroup for a group the node already runs.
var ErrGroupExists = errors.New("cluster: group already running")

// ErrNoGroup is returned by CloseGroup and DropGroup for a group the node
// does not run.
var ErrNoGroup = errors.New("cluster: no such group")

// AddGroup starts this node's replica of group id while the node runs (a
// partition created after Start): its raft log in Dir/groups/<id>, its
// state machine sm. members are the names of the nodes holding the
// group, this one among them; a new group bootstraps with them as voters
// (every member must be given the same list), a group found on disk keeps
// the members its log records and members only has to name this node.
// Messages for the group that arrive before it is added are dropped and
// counted as for any unknown group (raft sends them again). It fails for
// the metadata group, for a group already running (ErrGroupExists), past
// the node's bound on groups, and before Start or after Stop.
func (n *Node) AddGroup(id uint64, members []string, sm StateMachine) (*Group, error) {
	return n.AddGroupWith(id, members, sm, nil)
}

// AddGroupWith is AddGroup with the group's Config adjusted by tune
// before it opens (a replicated partition's: its raft log in the
// partition's directory, its OnLeader, CompactBehindMatch, limits). tune
// may change anything but ID, Peers and Join, which stay the node's.
func (n *Node) AddGroupWith(id uint64, members []string, sm StateMachine, tune func(*Config)) (*Group, error) {
	if id == MetaGroup || id >= maxGroupID {
		return nil, fmt.Errorf("cluster: node %s: group ID %d is not a partition group's (1..%d)", n.cfg.Name, id, maxGroupID-1)
	}
	if sm == nil {
		return nil, fmt.Errorf("cluster: node %s: group %d needs a state machine", n.cfg.Name, id)
	}
	peers, err := n.memberIDs(members)
	if err != nil {
		return nil, fmt.Errorf("cluster: node %s: group %d: %w", n.cfg.Name, id, err)
	}
	// Opening replays the group's log: not under mu, which deliver takes
	// for every message. The slot is held by a nil entry meanwhile, so a
	// second AddGroup of the same id fails and Stop waits for nothing it
	// cannot see (it closes the group below if it ran meanwhile).
	n.mu.Lock()
	switch {
	case n.state != 1 || n.tr == nil:
		n.mu.Unlock()
		return nil, fmt.Errorf("cluster: node %s is not running", n.cfg.Name)
	case n.hasGroupLocked(id):
		n.mu.Unlock()
		return nil, fmt.Errorf("cluster: node %s: group %d: %w", n.cfg.Name, id, ErrGroupExists)
	case len(n.groups)+len(n.opening) >= maxGroups:
		n.mu.Unlock()
		return nil, fmt.Errorf("cluster: node %s: group %d: the node runs %d groups, at most %d", n.cfg.Name, id, len(n.groups), maxGroups)
	}
	if n.opening == nil {
		n.opening = map[uint64]bool{}
	}
	n.opening[id] = true
	tr := n.tr
	n.mu.Unlock()

	gc := n.groupConfig(id, peers, false)
	if tune != nil {
		tune(&gc)
		gc.ID, gc.Peers, gc.Join = n.id, peers, false
	}
	g, err := OpenGroup(gc, sm, tr.Group(id), n.cfg.Tick)

	n.mu.Lock()
	delete(n.opening, id)
	if err == nil && n.state != 1 { // stopped while opening
		n.mu.Unlock()
		g.Close()
		return nil, fmt.Errorf("cluster: node %s stopped while group %d opened", n.cfg.Name, id)
	}
	if err == nil {
		n.groups[id] = g
	}
	n.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("cluster: node %s: group %d: %w", n.cfg.Name, id, err)
	}
	return g, nil
}

func (n *Node) hasGroupLocked(id uint64) bool {
	return n.groups[id] != nil || n.opening[id]
}

// memberIDs maps member names to raft IDs, checking that this node is one
// of them, none repeats and each is a node this one can reach (itself, a
// seed or a peer of its book).
func (n *Node) memberIDs(members []string) ([]uint64, error) {
	if len(members) == 0 {
		return nil, errors.New("no members")
	}
	known := map[string]bool{n.cfg.Name: true}
	for _, p := range n.cfg.Seeds {
		known[p.Name] = true
	}
	for name := range n.Peers() {
		known[name] = true
	}
	ids := make([]uint64, 0, len(members))
	for _, m := range members {
		if !known[m] {
			return nil, fmt.Errorf("member %q is not a node of this cluster", m)
		}
		id := NodeID(m)
		if slices.Contains(ids, id) {
			return nil, fmt.Errorf("member %q listed twice", m)
		}
		ids = append(ids, id)
	}
	if !slices.Contains(ids, n.id) {
		return nil, fmt.Errorf("this node (%s) is not among the members %v", n.cfg.Name, members)
	}
	return ids, nil
}

// CloseGroup stops this node's replica of group id (proposals waiting on
// it end with ErrClosed, their outcome unknown; its storage is synced),
// keeping its raft log for a later AddGroup.
func (n *Node) CloseGroup(id uint64) error {
	if id == MetaGroup {
		return fmt.Errorf("cluster: node %s: the metadata group closes only with the node", n.cfg.Name)
	}
	n.mu.Lock()
	g := n.groups[id]
	delete(n.groups, id)
	n.mu.Unlock()
	if g == nil {
		return fmt.Errorf("cluster: node %s: group %d: %w", n.cfg.Name, id, ErrNoGroup)
	}
	if err := g.Close(); err != nil {
		return fmt.Errorf("cluster: node %s: close group %d: %w", n.cfg.Name, id, err)
	}
	return nil
}

// DropGroup closes group id and removes its raft log (a deleted
// partition). A group added again later starts empty.
func (n *Node) DropGroup(id uint64) error {
	if err := n.CloseGroup(id); err != nil {
		return err
	}
	if err := os.RemoveAll(n.groupDir(id)); err != nil {
		return fmt.Errorf("cluster: node %s: remove group %d: %w", n.cfg.Name, id, err)
	}
	return nil
}

// OpenMeta opens the metadata group of a node started with
// NodeConfig.MetaLater, sm its state machine (wrapped by the peer book as
// at Start). Until then the node drops the group's messages, counted as
// for an unknown group (raft sends them again).
func (n *Node) OpenMeta(sm StateMachine) error {
	if sm == nil {
		return fmt.Errorf("cluster: node %s: the metadata group needs a state machine", n.cfg.Name)
	}
	n.mu.Lock()
	switch {
	case !n.cfg.MetaLater:
		n.mu.Unlock()
		return fmt.Errorf("cluster: node %s opened its metadata group at Start", n.cfg.Name)
	case n.state != 1 || n.tr == nil:
		n.mu.Unlock()
		return fmt.Errorf("cluster: node %s is not running", n.cfg.Name)
	case n.hasGroupLocked(MetaGroup):
		n.mu.Unlock()
		return fmt.Errorf("cluster: node %s: metadata group: %w", n.cfg.Name, ErrGroupExists)
	}
	if n.opening == nil {
		n.opening = map[uint64]bool{}
	}
	n.opening[MetaGroup] = true
	tr, book := n.tr, n.book
	n.mu.Unlock()
	book.inner = sm // no group runs the book yet: nothing reads it meanwhile
	g, err := OpenGroup(n.groupConfig(MetaGroup, n.ids, n.cfg.Join), book, tr.Group(MetaGroup), n.cfg.Tick)
	n.mu.Lock()
	delete(n.opening, MetaGroup)
	if err == nil && n.state != 1 {
		n.mu.Unlock()
		g.Close()
		return fmt.Errorf("cluster: node %s stopped while its metadata group opened", n.cfg.Name)
	}
	if err == nil {
		n.groups[MetaGroup] = g
	}
	n.mu.Unlock()
	if err != nil {
		return fmt.Errorf("cluster: node %s: metadata group: %w", n.cfg.Name, err)
	}
	return nil
}
