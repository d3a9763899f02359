package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// mountTmpfs mounts a tmpfs of the given size on a new directory for the
// test, or skips with the reason when it cannot (not root, no mount).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("full-disk test needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// logRecorder keeps the records logged at a level or above.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
	min  slog.Level
}

func (r *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= r.min }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, rec.Level.String()+" "+rec.Message)
	r.mu.Unlock()
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

func (r *logRecorder) count(sub string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

// fillDisk writes 256 KiB files into dir until the disk is full and
// returns them.
func fillDisk(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	chunk := make([]byte, 256<<10)
	for i := range 1024 {
		p := filepath.Join(dir, fmt.Sprintf("filler-%d", i))
		if err := os.WriteFile(p, chunk, 0o644); err != nil {
			_ = os.Remove(p)
			return files
		}
		files = append(files, p)
	}
	t.Fatal("the disk never filled")
	return nil
}

// TestFullDiskAnswersDiskFullAndResumes: a full disk used to answer
// `-ERR 'internal ... fallocate ...: no space left on device'`, log
// nothing, and stay refused with 5 MB free while the log waited for room
// for 16 MiB. It is now disk_full (retriable, the connection stays),
// logged once per episode at ERROR with the path, shown in /readyz and
// /metrics, and publishing resumes as soon as some room is free.
func TestFullDiskAnswersDiskFullAndResumes(t *testing.T) {
	mnt := mountTmpfs(t, "24m")
	logs := &logRecorder{min: slog.LevelError}
	s := startServer(t, func(o *Options) {
		o.NoBroker = false
		o.DataDir = filepath.Join(mnt, "data")
		o.HTTPListen = "127.0.0.1:0"
		o.Logger = slog.New(logs)
	})
	w := fibrilConn(t, s, "")
	w.send("TOPIC CREATE d\r\n")
	w.expect(`^\+OK \{`)
	body := strings.Repeat("x", 32<<10)
	for range 160 { // 5 MiB: the active segment has grown to 8 MiB
		w.send(fmt.Sprintf("PUB d %d\r\n%s\r\n", len(body), body))
		w.expect(`^\+OK 0:\d+$`)
	}
	fillers := fillDisk(t, mnt)
	full := ""
	for i := 0; i < 400 && full == ""; i++ {
		w.send(fmt.Sprintf("PUB d %d\r\n%s\r\n", len(body), body))
		if l := w.expect(`^(\+OK 0:\d+|-ERR .*)$`); strings.HasPrefix(l, "-ERR") {
			full = l
		}
	}
	if !strings.HasPrefix(full, "-ERR 'disk_full ") {
		t.Fatalf("publishing onto a full disk: %q, want disk_full", full)
	}
	for range 5 { // the connection stays; the episode is logged once
		w.send(fmt.Sprintf("PUB d %d\r\n%s\r\n", len(body), body))
		w.expect(`^-ERR 'disk_full `)
	}
	w.send("PING\r\n")
	w.expect(`^PONG$`)
	if n := logs.count("disk full at " + mnt); n != 1 {
		t.Fatalf("%d ERROR records naming the full disk, want 1: %v", n, logs.msgs)
	}
	base := "http://" + s.HTTPAddr().String()
	if code, b := httpGet(t, base+"/readyz", ""); code != 503 || !strings.Contains(string(b), "disk full") {
		t.Fatalf("/readyz on a full disk: %d %s", code, b)
	}
	if _, b := httpGet(t, base+"/metrics", ""); !strings.Contains(string(b), "\nfibril_disk_full 1\n") {
		t.Fatal("/metrics lacks fibril_disk_full 1")
	}
	// 1 MiB free again: far less than the 8 MiB more the log used to wait
	// for (its next doubling, to 16 MiB).
	for _, f := range fillers[:4] {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	w.send(fmt.Sprintf("PUB d %d\r\n%s\r\n", len(body), body))
	w.expect(`^\+OK 0:\d+$`)
	if code, b := httpGet(t, base+"/readyz", ""); code != 200 {
		t.Fatalf("/readyz with room again: %d %s", code, b)
	}
	if _, b := httpGet(t, base+"/metrics", ""); !strings.Contains(string(b), "\nfibril_disk_full 0\n") {
		t.Fatal("/metrics lacks fibril_disk_full 0 once room is back")
	}
}
