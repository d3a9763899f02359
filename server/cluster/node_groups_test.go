package cluster

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// addGroup adds group id to node name with members, registering its state
// machine for check.
func (c *testCluster) addGroup(name string, id uint64, members ...string) error {
	sm := &lockedSM{sm: newTestSM()}
	if _, err := c.node(name).AddGroup(id, members, sm); err != nil {
		return err
	}
	c.mu.Lock()
	c.sms[name][id] = sm
	c.mu.Unlock()
	return nil
}

// TestNodeAddGroupAtRuntime: a partition group created after the nodes
// started replicates like the groups of their configs, survives a
// member's restart (added again after Start, it catches up from its
// log), refuses bad member lists and duplicates, and closing or dropping
// it on one member leaves the others a quorum.
func TestNodeAddGroupAtRuntime(t *testing.T) {
	all := []string{"n1", "n2", "n3"}
	c := newTestCluster(t, all...)
	for _, n := range all {
		if err := c.addGroup(n, 7, all...); err != nil {
			t.Fatalf("add group 7 to %s: %v", n, err)
		}
	}
	hist := newHistory()
	c.proposeMany(7, hist, "a", 100, 4)
	c.check(7, hist, all...)

	n1 := c.node("n1")
	for _, tc := range []struct {
		name    string
		id      uint64
		members []string
		want    error
	}{
		{"again", 7, all, ErrGroupExists},
		{"metadata", MetaGroup, all, nil},
		{"unknown member", 8, []string{"n1", "nosuch"}, nil},
		{"not a member", 8, []string{"n2", "n3"}, nil},
		{"twice", 8, []string{"n1", "n1"}, nil},
		{"none", 8, nil, nil},
	} {
		_, err := n1.AddGroup(tc.id, tc.members, &lockedSM{sm: newTestSM()})
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: AddGroup(%d, %v) = %v, want an error (%v)", tc.name, tc.id, tc.members, err, tc.want)
		}
	}
	if n1.Group(8) != nil {
		t.Fatal("a refused group is running")
	}

	// A restart: the group is the caller's to add again, from its log.
	c.stop("n2")
	c.proposeMany(7, hist, "b", 20, 2)
	c.start("n2")
	if err := c.addGroup("n2", 7, "n2"); err != nil {
		t.Fatalf("add group 7 again after a restart: %v", err)
	}
	c.proposeMany(7, hist, "c", 10, 1)
	c.check(7, hist, all...)

	// Closed on one member: the other two still commit.
	if err := c.node("n3").CloseGroup(7); err != nil {
		t.Fatal(err)
	}
	if err := c.node("n3").CloseGroup(7); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("second CloseGroup: %v, want ErrNoGroup", err)
	}
	var lead *Node
	waitLong(t, "a leader of group 7 on n1 or n2", func() bool {
		for _, n := range []string{"n1", "n2"} {
			if g := c.node(n).Group(7); g != nil && g.Leader() == c.node(n).ID() {
				lead = c.node(n)
				return true
			}
		}
		return false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := lead.Group(7).Propose(ctx, []byte("d0")); err != nil {
		t.Fatalf("propose with one member closed: %v", err)
	}
	if err := c.node("n3").DropGroup(7); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("DropGroup of a closed group: %v, want ErrNoGroup", err)
	}
	if err := c.addGroup("n3", 7, all...); err != nil {
		t.Fatal(err)
	}
	dir := c.node("n3").groupDir(7)
	if err := c.node("n3").DropGroup(7); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("DropGroup left %s: %v", dir, err)
	}
}

// TestNodeAddGroupOnASubset: a group of two of three nodes elects and
// commits among them; the third never runs it.
func TestNodeAddGroupOnASubset(t *testing.T) {
	c := newTestCluster(t, "n1", "n2", "n3")
	for _, n := range []string{"n1", "n2"} {
		if err := c.addGroup(n, 9, "n1", "n2"); err != nil {
			t.Fatal(err)
		}
	}
	var lead *Node
	waitLong(t, "a leader of group 9", func() bool {
		for _, n := range []string{"n1", "n2"} {
			if g := c.node(n).Group(9); g.Leader() == c.node(n).ID() {
				lead = c.node(n)
				return true
			}
		}
		return false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := lead.Group(9).Propose(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if c.node("n3").Group(9) != nil {
		t.Fatal("n3 runs a group it is not a member of")
	}
}
