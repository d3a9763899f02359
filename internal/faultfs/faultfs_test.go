package faultfs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mountT mounts a fresh backing directory, or skips the test saying why
// FUSE is not available here.
func mountT(t *testing.T, opts Options) *FS {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
	f, err := Mount(t.TempDir(), t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return f
}

func writeAt(t *testing.T, path string, data []byte, off int64, sync bool) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := unix.Fdatasync(int(fh.Fd())); err != nil {
			t.Fatal(err)
		}
	}
}

func powerCut(t *testing.T, f *FS) {
	t.Helper()
	if err := f.PowerCut(); err != nil {
		t.Fatal(err)
	}
	if err := f.Remount(); err != nil {
		t.Fatal(err)
	}
}

func TestPowerCutDropsUnsyncedWrites(t *testing.T) {
	f := mountT(t, Options{})
	p := filepath.Join(f.Mountpoint, "seg")
	synced := bytes.Repeat([]byte("A"), 10000)
	writeAt(t, p, synced, 0, true)
	writeAt(t, p, bytes.Repeat([]byte("B"), 1000), 5000, false)  // overwrite, unsynced
	writeAt(t, p, bytes.Repeat([]byte("C"), 3000), 10000, false) // append, unsynced
	fresh := filepath.Join(f.Mountpoint, "fresh")
	writeAt(t, fresh, []byte("never synced"), 0, false)
	if s := f.Stats(); s.Tracked != 2 || s.Held == 0 {
		t.Fatalf("before the cut: %+v", s)
	}
	powerCut(t, f)
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, synced) {
		t.Fatalf("after the power cut: %d bytes, want the 10000 synced A's (first difference at %d)", len(got), diffAt(got, synced))
	}
	if got, err := os.ReadFile(fresh); err != nil || len(got) != 0 {
		t.Fatalf("an unsynced new file keeps %q (%v); want it empty", got, err)
	}
	if s := f.Stats(); s.Tracked != 0 || s.Held != 0 || s.PowerCuts != 1 || s.Truncated != 2 {
		t.Fatalf("after the cut: %+v", s)
	}
}

func TestPowerCutKeepsSyncedWrites(t *testing.T) {
	f := mountT(t, Options{})
	p := filepath.Join(f.Mountpoint, "log")
	writeAt(t, p, []byte("one"), 0, true)
	writeAt(t, p, []byte("two"), 3, true)
	writeAt(t, p, []byte("three"), 6, false)
	powerCut(t, f)
	if got, _ := os.ReadFile(p); string(got) != "onetwo" {
		t.Fatalf("got %q, want the synced %q", got, "onetwo")
	}
}

func TestTruncateGrowIsUnsyncedShrinkIsDurable(t *testing.T) {
	f := mountT(t, Options{})
	p := filepath.Join(f.Mountpoint, "seg")
	writeAt(t, p, bytes.Repeat([]byte("x"), 8192), 0, true)
	if err := os.Truncate(p, 1<<20); err != nil { // preallocation by truncate
		t.Fatal(err)
	}
	powerCut(t, f)
	if st, err := os.Stat(p); err != nil || st.Size() != 8192 {
		t.Fatalf("after growing unsynced and a cut: %v %v, want 8192 bytes", st.Size(), err)
	}
	if err := os.Truncate(p, 100); err != nil {
		t.Fatal(err)
	}
	powerCut(t, f)
	if st, err := os.Stat(p); err != nil || st.Size() != 100 {
		t.Fatalf("after shrinking and a cut: %v %v, want 100 bytes", st.Size(), err)
	}
}

func TestPunchHoleIsUndone(t *testing.T) {
	f := mountT(t, Options{})
	p := filepath.Join(f.Mountpoint, "seg")
	data := bytes.Repeat([]byte("y"), 3*blockSize)
	writeAt(t, p, data, 0, true)
	fh, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Fallocate(int(fh.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, blockSize, blockSize)
	fh.Close()
	if err != nil {
		t.Skipf("the backing file system cannot punch holes: %v", err)
	}
	powerCut(t, f)
	if got, _ := os.ReadFile(p); !bytes.Equal(got, data) {
		t.Fatalf("punched hole survived the cut (first difference at %d)", diffAt(got, data))
	}
}

func TestFailSyncAndWrites(t *testing.T) {
	f := mountT(t, Options{})
	p := filepath.Join(f.Mountpoint, "f")
	fh, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	f.FailSync(syscall.EIO)
	if err := unix.Fdatasync(int(fh.Fd())); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fdatasync under fail-sync EIO: %v", err)
	}
	f.FailWrites(syscall.ENOSPC)
	if _, err := fh.WriteAt([]byte("more"), 4); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write under fail-write ENOSPC: %v", err)
	}
	f.Heal()
	if _, err := fh.WriteAt([]byte("more"), 4); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fdatasync(int(fh.Fd())); err != nil {
		t.Fatal(err)
	}
	s := f.Stats()
	if s.FailedSyncs != 1 || s.FailedWrites != 1 || s.Tracked != 0 {
		t.Fatalf("stats %+v", s)
	}
	// The failed fsync made nothing durable: only the healed one did.
	fh.Close()
	powerCut(t, f)
	if got, _ := os.ReadFile(p); string(got) != "datamore" {
		t.Fatalf("got %q", got)
	}
}

func TestMaxUnsyncedRefusesWrites(t *testing.T) {
	f := mountT(t, Options{MaxUnsynced: 2 * blockSize})
	p := filepath.Join(f.Mountpoint, "f")
	writeAt(t, p, bytes.Repeat([]byte("z"), 4*blockSize), 0, true)
	fh, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	_, err = fh.WriteAt(bytes.Repeat([]byte("w"), 4*blockSize), 0)
	if !errors.Is(err, syscall.EIO) || f.Stats().Refused != 1 {
		t.Fatalf("write over the bound: %v, stats %+v", err, f.Stats())
	}
}

// TestMmapReadsSeeWrites checks what the broker relies on over FUSE: a
// MAP_SHARED read-only map of a file written with pwrite sees the bytes
// (page cache, no direct_io), also those written after the map was made.
func TestMmapReadsSeeWrites(t *testing.T) {
	f := mountT(t, Options{})
	p := filepath.Join(f.Mountpoint, "seg")
	writeAt(t, p, make([]byte, 2*blockSize), 0, true)
	out := inChild(t, "TestMmapReadsSeeWritesChild", p)
	if !strings.Contains(out, "map sees the writes") {
		t.Fatalf("child reading the map:\n%s", out)
	}
}

// inChild runs the test named test in a child process with
// FAULTFS_CHILD_PATH=path and returns its output, failing t if it failed.
// Maps of files on a mount are read in a child: a page fault on a FUSE mount
// blocks its thread in the kernel, where the Go runtime cannot stop it, so a
// garbage collection that began in the process serving the mount waited for
// that thread forever while the fault waited for the server
// (TestMmapReadsSeeWrites hung for 13 minutes under -race and the whole run
// timed out).
func inChild(t *testing.T, test, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "FAULTFS_CHILD_PATH="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", test, err, out)
	}
	return string(out)
}

// childPath is the file a child test works on, or skips a test run
// directly.
func childPath(t *testing.T) string {
	p := os.Getenv("FAULTFS_CHILD_PATH")
	if p == "" {
		t.Skip("run in a child process by the test named in its comment")
	}
	return p
}

// TestMmapReadsSeeWritesChild is TestMmapReadsSeeWrites's child: it maps
// the file, writes through it and reads the map.
func TestMmapReadsSeeWritesChild(t *testing.T) {
	fh, err := os.OpenFile(childPath(t), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	m, err := unix.Mmap(int(fh.Fd()), 0, 2*blockSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap over faultfs: %v", err)
	}
	defer unix.Munmap(m)
	if _, err := fh.WriteAt([]byte("hello"), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("world"), blockSize+7); err != nil {
		t.Fatal(err)
	}
	if string(m[10:15]) != "hello" || string(m[blockSize+7:blockSize+12]) != "world" {
		t.Fatalf("the map sees %q and %q", m[10:15], m[blockSize+7:blockSize+12])
	}
	t.Log("map sees the writes")
}

func TestControlProtocol(t *testing.T) {
	f := mountT(t, Options{})
	sock := filepath.Join(t.TempDir(), "ctl")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { _ = f.Serve(ln) }()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for _, tc := range []struct{ cmd, want string }{
		{"fail-sync EIO", "+OK"},
		{"fail-write enospc", "+OK"},
		{"fail-sync EBADF", "-ERR unknown errno"},
		{"fail-sync", "-ERR fail-sync takes one errno"},
		{"stats", "+OK writes=0"},
		{"heal", "+OK"},
		{"powercut", "+OK"},
		{"stats", "+OK writes=0 syncs=0 failed_syncs=0 failed_writes=0 refused=0 power_cuts=1"},
		{"remount", "+OK"},
		{"bogus", "-ERR unknown command"},
	} {
		if _, err := c.Write([]byte(tc.cmd + "\n")); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(line, tc.want) {
			t.Fatalf("%s: %q, want %q...", tc.cmd, line, tc.want)
		}
	}
	// Connections are bounded: with the limit held, one more is refused.
	var held []net.Conn
	for range maxControlConns - 1 {
		h, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		held = append(held, h)
	}
	for _, h := range held { // each is being served once it answers
		if _, err := h.Write([]byte("heal\n")); err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(h).ReadString('\n'); err != nil || line != "+OK\n" {
			t.Fatalf("held connection: %q %v", line, err)
		}
	}
	extra, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if line, _ := bufio.NewReader(extra).ReadString('\n'); !strings.HasPrefix(line, "-ERR too many control connections") {
		t.Fatalf("connection over the bound: %q", line)
	}
	// Injected failures were healed: a write and its fsync work again.
	writeAt(t, filepath.Join(f.Mountpoint, "after"), []byte("ok"), 0, true)
}

func diffAt(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestMmapOverDirectIO shows why faultfs keeps the page cache: with
// direct_io a shared map of a file is refused (go-fuse does not negotiate
// FUSE_DIRECT_IO_ALLOW_MMAP), and the broker maps its segments. Should a
// kernel and library allow it, the map must still see what pwrite wrote.
func TestMmapOverDirectIO(t *testing.T) {
	f := mountT(t, Options{directIO: true})
	p := filepath.Join(f.Mountpoint, "seg")
	writeAt(t, p, make([]byte, blockSize), 0, true)
	out := inChild(t, "TestMmapOverDirectIOChild", p)
	if !strings.Contains(out, "MAP_SHARED over direct_io") {
		t.Fatalf("child mapping over direct_io:\n%s", out)
	}
}

// TestMmapOverDirectIOChild is TestMmapOverDirectIO's child (inChild).
func TestMmapOverDirectIOChild(t *testing.T) {
	fh, err := os.OpenFile(childPath(t), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	m, err := unix.Mmap(int(fh.Fd()), 0, blockSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Logf("MAP_SHARED over direct_io: %v (as FAULTS.md says)", err)
		return
	}
	defer unix.Munmap(m)
	if _, err := fh.WriteAt([]byte("hello"), 10); err != nil {
		t.Fatal(err)
	}
	if string(m[10:15]) != "hello" {
		t.Fatalf("a shared map over direct_io was allowed but reads %q after pwrite", m[10:15])
	}
	t.Log("MAP_SHARED over direct_io is allowed here and coherent")
}
