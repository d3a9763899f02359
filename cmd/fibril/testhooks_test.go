package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server"
)

func TestTestHooksClockOffsetFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offset")
	if err := os.WriteFile(path, []byte("3600000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"FIBRIL_TEST_CLOCK_OFFSET_FILE": path}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	opts := server.DefaultOptions()
	stop, err := testHooks(&opts, lookup)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if opts.Engine.Clock == nil {
		t.Fatal("no clock installed")
	}
	if d := opts.Engine.Clock.Now().Sub(time.Now()); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("clock is %v ahead, want an hour", d)
	}
	if opts.Engine.OpenStore != nil {
		t.Fatal("a normal build installed the broken no-sync store")
	}
	// Without the variable nothing changes.
	plain := server.DefaultOptions()
	stop2, err := testHooks(&plain, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	stop2()
	if plain.Engine.Clock != server.DefaultOptions().Engine.Clock {
		t.Fatal("the clock changed without FIBRIL_TEST_CLOCK_OFFSET_FILE")
	}
}

// TestTestHooksCPUProfile: FIBRIL_TEST_CPUPROFILE starts a CPU profile that
// stop writes to the file (a gzipped pprof profile); a path that cannot be
// created is an error naming the variable.
func TestTestHooksCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	opts := server.DefaultOptions()
	stop, err := testHooks(&opts, func(k string) (string, bool) {
		return path, k == "FIBRIL_TEST_CPUPROFILE"
	})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile is %d bytes, not gzip", len(b))
	}
	bad := filepath.Join(t.TempDir(), "missing", "cpu.prof")
	if _, err := testHooks(&opts, func(k string) (string, bool) {
		return bad, k == "FIBRIL_TEST_CPUPROFILE"
	}); err == nil || !strings.Contains(err.Error(), "FIBRIL_TEST_CPUPROFILE") {
		t.Fatalf("uncreatable path: err %v", err)
	}
}
