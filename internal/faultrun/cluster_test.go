package faultrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/history"
	"github.com/fibrilmq/fibril/internal/netns"
)

// newCluster makes a namespaced cluster of size nodes for the test, or
// skips saying why it cannot; its namespaces go with the test, also when
// it fails.
func newCluster(t *testing.T, bin string, size int) *Cluster {
	t.Helper()
	if err := netns.Available(); err != nil {
		t.Skipf("a namespaced cluster needs root and ip(8): %v", err)
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	prefix := "fc" + hex.EncodeToString(b)
	c, err := NewCluster(prefix, bin, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		out, _ := exec.Command("ip", "netns", "list").CombinedOutput()
		if strings.Contains(string(out), prefix) {
			t.Errorf("namespaces left after Close:\n%s", out)
		}
	})
	return c
}

// TestClusterFaultRunShort is the cluster's short form: 3 `fibril serve`
// nodes, each in its own network namespace, under one fault of each
// network kind (the leader isolated, a 1/2 split with the leader alone, a
// bridge, and netem delay, loss and duplication where the kernel has
// netem); the checker must find nothing, with leases held across
// failovers.
func TestClusterFaultRunShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary under faults")
	}
	bin := fibrilBinary(t, "")
	c := newCluster(t, bin, 3)
	faults := NetworkFaults()
	if !c.Netem() {
		t.Log("netem kinds left out: this kernel has no sch_netem")
	}
	seed := seedFor(t)
	keepDir := os.Getenv("FIBRIL_FAULTS_KEEP")
	if keepDir == "" {
		keepDir = os.TempDir()
	}
	rep, err := Run(context.Background(), Config{
		Bin: bin, Dir: t.TempDir(), Seed: seed, Duration: 30 * time.Second, Faults: faults,
		QuietMin: 300 * time.Millisecond, QuietMax: 800 * time.Millisecond, KeepDir: keepDir, Logf: t.Logf,
		StartNodes: c.StartNodes, Within: c.Within, Replicated: true,
	})
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	t.Logf("seed %d, %v, faults %v:\n%s", seed, rep.Elapsed.Round(time.Second), rep.Injected, table(rep.Result))
	if !rep.Result.Valid() {
		t.Fatalf("seed %d: the checker failed the run; history kept in %s (replay: FIBRIL_FAULTS_SEED=%d)", seed, rep.History, seed)
	}
	if rep.Result.Confirmed == 0 || rep.Result.Acked == 0 {
		t.Fatalf("nothing happened: %s", rep.Result.Summary())
	}
	for _, k := range []string{"link-down", "split", "bridge"} {
		if rep.Result.Faults[k] == 0 {
			t.Errorf("no %s fault injected: %v", k, rep.Injected)
		}
	}
}

// TestClusterBrokenBuildFailsTheChecker proves the checker can fail on a
// cluster: a build that confirms before the quorum commit (-tags
// fibril_broken_quorum) loses confirmed messages when its leader is
// split from the others (it confirms until it steps down) or killed,
// and answers acks the new leader never learns of (one partition, so
// that the leader split off is the one every producer's values go to): the run must be judged
// invalid, with confirmed messages lost or acked ones delivered again.
func TestClusterBrokenBuildFailsTheChecker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary under faults")
	}
	bin := fibrilBinary(t, "fibril_broken_quorum")
	c := newCluster(t, bin, 3)
	seed := seedFor(t)
	rep, err := Run(context.Background(), Config{
		Bin: bin, Dir: t.TempDir(), Seed: seed, Duration: 14 * time.Second, Producers: 6, Partitions: 1,
		Faults: []Fault{Split{}, Leader{Kill{}}}, QuietMin: 500 * time.Millisecond, QuietMax: time.Second,
		KeepDir: t.TempDir(), Logf: t.Logf, StartNodes: c.StartNodes, Within: c.Within, Replicated: true,
	})
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	t.Logf("seed %d, faults %v:\n%s", seed, rep.Injected, table(rep.Result))
	if rep.Result.Valid() || rep.Result.N(history.Lost)+rep.Result.N(history.AckedRedelivered) == 0 {
		t.Fatalf("seed %d: a build that confirms before the quorum commit passed the checker", seed)
	}
	if _, err := os.Stat(rep.History); err != nil {
		t.Fatalf("the failing run's history was not kept: %v", err)
	}
}
