package faultrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/netns"
)

// TestFaultRunInNamespaces runs the node in a network namespace of its
// own and the clients in another, joined by a bridge, and cuts the node's
// link past the lease (the single-node form of issue 26's network faults),
// with kills in between. The checker must find nothing.
func TestFaultRunInNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary under faults")
	}
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	bin := fibrilBinary(t, "")
	ns, err := NewNamespaces("fr"+hex.EncodeToString(b), bin)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ns.Close(); err != nil {
			t.Error(err)
		}
	}()
	seed := seedFor(t)
	keepDir := os.Getenv("FIBRIL_FAULTS_KEEP")
	if keepDir == "" {
		keepDir = os.TempDir()
	}
	rep, err := Run(context.Background(), Config{
		Bin: bin, Dir: t.TempDir(), Seed: seed, Duration: 12 * time.Second,
		Faults:   []Fault{Isolate{}, Kill{}},
		QuietMin: 300 * time.Millisecond, QuietMax: time.Second, KeepDir: keepDir, Logf: t.Logf,
		Within: ns.Within, StartNodes: ns.StartNodes,
	})
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	t.Logf("seed %d, %v, faults %v:\n%s", seed, rep.Elapsed.Round(time.Second), rep.Injected, table(rep.Result))
	if !rep.Result.Valid() {
		t.Fatalf("seed %d: the checker failed the run; history kept in %s", seed, rep.History)
	}
	if rep.Result.Faults["link-down"] == 0 || rep.Result.Confirmed == 0 || rep.Result.Acked == 0 {
		t.Fatalf("no isolation, or nothing happened: %s", rep.Result.Summary())
	}
}
