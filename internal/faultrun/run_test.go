package faultrun

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/conformance/fibrilproc"
	"github.com/fibrilmq/fibril/internal/faultfs"
	"github.com/fibrilmq/fibril/internal/history"
)

var builds sync.Map // tags -> *build

type build struct {
	once sync.Once
	path string
	err  error
}

// fibrilBinary builds cmd/fibril once per test binary and set of build
// tags ("" for the real build, which $FIBRIL_BIN may supply).
func fibrilBinary(t *testing.T, tags string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(tags, &build{})
	b := v.(*build)
	b.once.Do(func() {
		if tags == "" && os.Getenv("FIBRIL_BIN") != "" {
			b.path = os.Getenv("FIBRIL_BIN")
			return
		}
		dir, err := os.MkdirTemp("", "fibril-faults-bin")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "fibril")
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "build", "-tags", tags, "-o", b.path, fibrilproc.Package).CombinedOutput()
		if err != nil {
			b.err = err
			b.path = string(out)
		}
	})
	if b.err != nil {
		t.Fatalf("building fibril (tags %q): %v\n%s", tags, b.err, b.path)
	}
	return b.path
}

// seedFor is $FIBRIL_FAULTS_SEED or a fresh seed, logged for replay.
func seedFor(t *testing.T) uint64 {
	if s := os.Getenv("FIBRIL_FAULTS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FIBRIL_FAULTS_SEED: %v", err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

func table(r *history.Result) string {
	var b bytes.Buffer
	_ = r.WriteTable(&b)
	return b.String()
}

// TestFaultRunShort is the short form: one run of every single-node fault
// kind (kill, pause past the lease, clock an hour forward and back, power
// cut when FUSE is here) under producers and consumers; the checker must
// find nothing. A failing run keeps its history under
// $FIBRIL_FAULTS_KEEP (default the system temp dir) and logs its seed.
func TestFaultRunShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary under faults")
	}
	if err := faultfs.Available(); err != nil {
		t.Logf("power cuts left out: %v", err)
	}
	seed := seedFor(t)
	keepDir := os.Getenv("FIBRIL_FAULTS_KEEP")
	if keepDir == "" {
		keepDir = os.TempDir()
	}
	rep, err := Run(context.Background(), Config{
		Bin: fibrilBinary(t, ""), Dir: t.TempDir(), Seed: seed, Duration: 16 * time.Second,
		QuietMin: 300 * time.Millisecond, QuietMax: time.Second, KeepDir: keepDir, Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("seed %d: %v (history %v)", seed, err, rep)
	}
	t.Logf("seed %d, %v, faults %v:\n%s", seed, rep.Elapsed.Round(time.Second), rep.Injected, table(rep.Result))
	if !rep.Result.Valid() {
		t.Fatalf("seed %d: the checker failed the run; history kept in %s (replay: FIBRIL_FAULTS_SEED=%d)", seed, rep.History, seed)
	}
	if rep.Result.Confirmed == 0 || rep.Result.Acked == 0 {
		t.Fatalf("nothing happened: %s", rep.Result.Summary())
	}
	if len(rep.Injected) < 4 {
		t.Fatalf("only %d faults injected: %v", len(rep.Injected), rep.Injected)
	}
}

// TestBrokenBuildFailsTheChecker proves the checker can fail: a build that
// confirms and acks without fsync (-tags fibril_broken_nosync) loses
// confirmed messages at the first power cut, and the run must be judged
// invalid.
func TestBrokenBuildFailsTheChecker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary under faults")
	}
	if err := faultfs.Available(); err != nil {
		t.Skipf("needs power cuts: %v", err)
	}
	seed := seedFor(t)
	rep, err := Run(context.Background(), Config{
		Bin: fibrilBinary(t, "fibril_broken_nosync"), Dir: t.TempDir(), Seed: seed, Duration: 6 * time.Second,
		Faults: []Fault{PowerCut{}}, QuietMin: time.Second, QuietMax: 2 * time.Second, KeepDir: t.TempDir(), Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	t.Logf("seed %d, faults %v:\n%s", seed, rep.Injected, table(rep.Result))
	if rep.Result.Valid() || rep.Result.N(history.Lost)+rep.Result.N(history.AckedRedelivered) == 0 {
		t.Fatalf("seed %d: a build that never fsyncs passed the checker", seed)
	}
	if _, err := os.Stat(rep.History); err != nil {
		t.Fatalf("the failing run's history was not kept: %v", err)
	}
}
