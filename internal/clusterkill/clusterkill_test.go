package clusterkill

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/conformance/fibrilproc"
)

var build struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// fibrilBinary builds cmd/fibril once per test binary (or takes
// $FIBRIL_BIN).
func fibrilBinary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		if build.dir, build.err = os.MkdirTemp("", "fibril-clusterkill-bin"); build.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		build.path, build.err = fibrilproc.Build(ctx, build.dir)
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

// envInt is $name as a number, or def.
func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

// runKills runs cfg and fails the test unless nothing confirmed was lost,
// no answered ack was undone and nothing unpublished was delivered. A
// failing run's history is copied to $FIBRIL_CLUSTER_KILL_KEEP (default
// the system temp dir).
func runKills(t *testing.T, cfg Config) *Report {
	t.Helper()
	cfg.Bin, cfg.Dir, cfg.Logf = fibrilBinary(t), t.TempDir(), t.Logf
	rep, err := Run(context.Background(), cfg)
	if err == nil && rep.Passed() && rep.Result.Confirmed > 0 && rep.Result.Acked > 0 {
		var b bytes.Buffer
		_ = rep.Result.WriteTable(&b)
		t.Logf("%s\n%s", rep.Summary(), b.String())
		return rep
	}
	keep := os.Getenv("FIBRIL_CLUSTER_KILL_KEEP")
	if keep == "" {
		keep = os.TempDir()
	}
	kept := filepath.Join(keep, "clusterkill-"+strconv.FormatInt(time.Now().UnixNano(), 10)+".jsonl")
	if b, rerr := os.ReadFile(rep.History); rerr == nil {
		_ = os.WriteFile(kept, b, 0o644)
	}
	if rep.Logs != "" {
		t.Logf("node logs:\n%s", rep.Logs)
	}
	if rep.Result == nil {
		t.Fatalf("%v (history kept in %s)", err, kept)
	}
	var b bytes.Buffer
	_ = rep.Result.WriteTable(&b)
	t.Fatalf("%v\n%s\n%s\nhistory kept in %s", err, rep.Summary(), b.String(), kept)
	return rep
}

// TestKillLeaderLosesNothing kills the leader of the topic's one
// partition $FIBRIL_CLUSTER_KILL_CYCLES times (default 5; `make
// cluster-kill` runs the long form) under a publisher with confirms and
// an acking consumer, restarting it each time: no confirmed message is
// lost, no answered ack undone, nothing delivered that was never
// published, and each time service comes back (within HangAfter: a hang
// bound, not a speed check). The resume times are logged.
func TestKillLeaderLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of real processes under SIGKILL")
	}
	cycles := envInt(t, "FIBRIL_CLUSTER_KILL_CYCLES", 5)
	parts := envInt(t, "FIBRIL_CLUSTER_KILL_PARTITIONS", 1)
	rate := envInt(t, "FIBRIL_CLUSTER_KILL_RATE", shortRate)
	rep := runKills(t, Config{Cycles: cycles, Partitions: parts, Rate: float64(rate)})
	if len(rep.Cycles) != cycles {
		t.Fatalf("%d cycles run, want %d", len(rep.Cycles), cycles)
	}
	killed := map[int]bool{}
	for _, c := range rep.Cycles {
		killed[c.Partition] = true
	}
	if len(killed) != min(cycles, parts) {
		t.Fatalf("the cycles killed the leaders of partitions %v, want each of %d", killed, min(cycles, parts))
	}
}

// TestKillFollowerLosesNothing: a follower of the partition killed with
// SIGKILL and restarted, cycle after cycle (a different one each time),
// under the same load: nothing confirmed lost, no answered ack undone,
// and the partition served throughout (the leader keeps its quorum).
func TestKillFollowerLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of real processes under SIGKILL")
	}
	rep := runKills(t, Config{Cycles: 3, Partitions: 1, Rate: shortRate, Victim: Follower})
	if len(rep.Cycles) != 3 {
		t.Fatalf("%d cycles run, want 3", len(rep.Cycles))
	}
	killed := map[string]bool{}
	for _, c := range rep.Cycles {
		killed[c.Node] = true
	}
	if len(killed) < 2 {
		t.Fatalf("the follower kills hit only %v, want both followers in turn", killed)
	}
}

// TestRollingRestartLosesNothing: every node of a 3-node cluster is
// stopped gracefully (SIGTERM) and restarted in turn, twice over, as an
// operator's rolling restart does, under a publisher with confirms and an
// acking consumer on a 2-partition topic: no confirmed message is lost,
// no answered ack undone, nothing delivered that was never published,
// and each partition is served again after each stop.
func TestRollingRestartLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of real processes")
	}
	rep := runKills(t, Config{Cycles: 6, Partitions: 2, Rate: shortRate, Victim: EachInTurn, Graceful: true})
	if len(rep.Cycles) != 6 {
		t.Fatalf("%d cycles run, want 6", len(rep.Cycles))
	}
	stopped := map[string]int{}
	for _, c := range rep.Cycles {
		stopped[c.Node]++
	}
	if len(stopped) != 3 {
		t.Fatalf("the rolling restart stopped %v, want each of 3 nodes twice", stopped)
	}
	for n, k := range stopped {
		if k != 2 {
			t.Fatalf("node %s stopped %d times, want 2 (%v)", n, k, stopped)
		}
	}
}

// shortRate is the short form's publish rate: low enough that its raft
// logs stay below replog's SnapshotEvery (4096 entries), so it does not
// meet replog's open caveat (a follower's compaction can leave a
// restarted replica needing segment files no one sends; its group stops,
// and the next leader kill leaves the partition without a quorum). The
// long form (make cluster-kill, RATE 400) runs into it.
const shortRate = 120
