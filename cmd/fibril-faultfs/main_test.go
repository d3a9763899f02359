package main

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/faultfs"
)

func TestFaultFSCommand(t *testing.T) {
	if err := faultfs.Available(); err != nil {
		t.Skip(err)
	}
	backing, mnt := t.TempDir(), t.TempDir()
	sock := filepath.Join(t.TempDir(), "ctl")
	sigs := make(chan os.Signal, 1)
	var out syncBuf
	done := make(chan int, 1)
	go func() { done <- run([]string{"-backing", backing, "-mount", mnt, "-control", sock}, &out, &out, sigs) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), `"mount"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no ready line: %s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("powercut\nstats\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	first, _ := r.ReadString('\n')
	second, _ := r.ReadString('\n')
	c.Close()
	if first != "+OK\n" || !strings.Contains(second, "power_cuts=1") {
		t.Fatalf("answers %q %q", first, second)
	}
	// The unsynced file was cut back to nothing in the backing directory.
	if b, err := os.ReadFile(filepath.Join(backing, "f")); err != nil || len(b) != 0 {
		t.Fatalf("backing file after the cut: %q %v", b, err)
	}
	sigs <- syscall.SIGTERM
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	if code := run([]string{"-mount", mnt}, &out, &out, sigs); code != 2 {
		t.Fatalf("missing flags: exit %d", code)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
