package clusterkill

import (
	"context"
	"testing"
	"time"
)

// TestGracefulStopHandsOffLeadership: a node stopped gracefully (SIGTERM)
// hands the leadership of the partitions it leads to another node before
// it exits, so the partition has a live leader as soon as the stop
// returns; without the hand-off the others wait out an election timeout
// (here at least 2 s: 40 ticks of 50 ms) after the leader's last
// heartbeat. Found by TestRollingRestartLosesNothing, whose graceful stops
// left publishes answered "no leader elected yet" and failed forwards for
// the length of an election.
func TestGracefulStopHandsOffLeadership(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of real processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := startCluster(ctx, fibrilBinary(t), t.TempDir(), 3, "--cluster-tick", "50ms", "--cluster-election-ticks", "40")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.close()
	if err := setup(ctx, cl, Config{Partitions: 1, LeaseMs: 5000, HangAfter: time.Minute}); err != nil {
		t.Fatal(err)
	}
	all := func(int) bool { return true }
	var leader int
	deadline := time.Now().Add(time.Minute)
	for {
		n, ok := cl.leaderOf(topic, 0, all)
		if ok {
			leader = n
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader for %s partition 0 after a minute\n%s", topic, cl.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cl.stop(leader); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	live := func(i int) bool { return i != leader }
	for {
		if n, ok := cl.leaderOf(topic, 0, live); ok {
			t.Logf("%s led partition 0; after its graceful stop %s leads it, %v after the stop returned", cl.Names[leader], cl.Names[n], time.Since(stopped).Round(time.Millisecond))
			return
		}
		if time.Since(stopped) > time.Second {
			t.Fatalf("1 s after %s's graceful stop no live node leads partition 0: the leadership was not handed off\n%s", cl.Names[leader], cl.logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
