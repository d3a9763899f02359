package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/crashfs"
	"github.com/fibrilmq/fibril/server/seglog"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func ent(index, term uint64) *pb.Entry {
	return &pb.Entry{Index: &index, Term: &term, Data: fmt.Appendf(nil, "e%d-t%d", index, term)}
}

func ents(from, to, term uint64) []*pb.Entry {
	var out []*pb.Entry
	for i := from; i <= to; i++ {
		out = append(out, ent(i, term))
	}
	return out
}

func hardState(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: &term, Vote: &vote, Commit: &commit}
}

func openT(t *testing.T, dir string, fsys seglog.FS) *Storage {
	t.Helper()
	s, err := OpenStorage(dir, fsys)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkLog checks that s holds exactly entries [first, last], each with
// the data ent() gives for its index and the term termOf says.
func checkLog(t *testing.T, s *Storage, first, last uint64, termOf func(uint64) uint64) {
	t.Helper()
	fi, _ := s.FirstIndex()
	li, _ := s.LastIndex()
	if fi != first || li != last {
		t.Fatalf("bounds [%d, %d], want [%d, %d]", fi, li, first, last)
	}
	if last < first {
		return
	}
	got, err := s.Entries(first, last+1, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range got {
		idx := first + uint64(i)
		want := ent(idx, termOf(idx))
		if e.GetIndex() != idx || e.GetTerm() != want.GetTerm() || string(e.Data) != string(want.Data) {
			t.Fatalf("entry %d = %d/%d %q, want term %d %q", idx, e.GetIndex(), e.GetTerm(), e.Data, want.GetTerm(), want.Data)
		}
		if tm, _ := s.Term(idx); tm != want.GetTerm() {
			t.Fatalf("Term(%d) = %d", idx, tm)
		}
	}
}

func TestStorageReopen(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, nil)
	if err := s.Bootstrap([]uint64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(hardState(2, 1, 5), ents(2, 10, 2), nil, true); err != nil {
		t.Fatal(err)
	}
	// A conflicting append from a new leader replaces 6.. with 6..7.
	if err := s.Save(hardState(3, 2, 5), ents(6, 7, 3), nil, true); err != nil {
		t.Fatal(err)
	}
	termOf := func(i uint64) uint64 {
		if i >= 6 {
			return 3
		}
		return 2
	}
	checkLog(t, s, 2, 7, termOf)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, nil)
	defer s.Close()
	checkLog(t, s, 2, 7, termOf)
	hs, cs, _ := s.InitialState()
	if hs.GetTerm() != 3 || hs.GetVote() != 2 || hs.GetCommit() != 5 {
		t.Fatalf("hard state %v", hs)
	}
	if fmt.Sprint(cs.Voters) != "[1 2 3]" {
		t.Fatalf("conf state %v", cs)
	}
	if tm, _ := s.Term(1); tm != 1 {
		t.Fatalf("Term(1) = %d, want the bootstrap snapshot's 1", tm)
	}
	if err := s.Bootstrap([]uint64{1}); err == nil {
		t.Fatal("Bootstrap of a used storage succeeded")
	}
}

func TestStorageCompactAndSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, nil)
	s.Bootstrap([]uint64{1})
	term2 := func(uint64) uint64 { return 2 }
	// Enough entries for several 4 MiB segments, so compaction drops files.
	big := make([]byte, 64<<10)
	for i := uint64(2); i <= 200; i++ {
		e := ent(i, 2)
		if i < 150 {
			e.Data = big
		}
		if err := s.Save(hardState(2, 1, i), []*pb.Entry{e}, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateSnapshot(160, &pb.ConfState{Voters: []uint64{1}}, []byte("sm@160")); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSnapshot(150, &pb.ConfState{Voters: []uint64{1}}, nil); !errors.Is(err, raft.ErrSnapOutOfDate) {
		t.Fatalf("older snapshot: %v", err)
	}
	if _, err := s.Entries(160, 161, 0); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("Entries below first: %v", err)
	}
	checkLog(t, s, 161, 200, term2)
	if len(s.log.Segments()) > 2 {
		t.Fatalf("%d segments after compaction", len(s.log.Segments()))
	}
	s.Close()
	s = openT(t, dir, nil)
	checkLog(t, s, 161, 200, term2)
	snap, _ := s.Snapshot()
	if string(snap.Data) != "sm@160" || snap.GetMetadata().GetTerm() != 2 {
		t.Fatalf("snapshot %v", snap)
	}
	hs, _, _ := s.InitialState()
	if hs.GetCommit() != 200 {
		t.Fatalf("hard state lost by compaction: %v", hs)
	}
	// A snapshot received from a leader replaces the whole log.
	i, tm := uint64(300), uint64(4)
	recv := &pb.Snapshot{Data: []byte("sm@300"), Metadata: &pb.SnapshotMetadata{Index: &i, Term: &tm, ConfState: &pb.ConfState{Voters: []uint64{1}}}}
	if err := s.Save(hardState(4, 0, 300), nil, recv, true); err != nil {
		t.Fatal(err)
	}
	checkLog(t, s, 301, 300, nil)
	s.Close()
	s = openT(t, dir, nil)
	defer s.Close()
	checkLog(t, s, 301, 300, nil)
	if snap, _ := s.Snapshot(); string(snap.Data) != "sm@300" {
		t.Fatalf("snapshot after reopen %q", snap.Data)
	}
	if names, _ := os.ReadDir(dir + "/snap"); len(names) != 1 {
		t.Fatalf("snapshot files %v", names)
	}
}

// TestStorageCrashKeepsSynced cuts power (internal/crashfs) after synced
// and unsynced saves: everything synced must come back, and what comes
// back past it must be a prefix of what was written, never invented.
func TestStorageCrashKeepsSynced(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		ffs := crashfs.New(seglog.OSFS())
		dir := t.TempDir()
		s := openT(t, dir, ffs)
		s.Bootstrap([]uint64{1})
		synced := uint64(1)
		last := uint64(1)
		for b := 0; b < 10; b++ {
			n := 1 + rng.Uint64N(5)
			sync := rng.IntN(2) == 0
			if err := s.Save(hardState(2, 1, last), ents(last+1, last+n, 2), nil, sync); err != nil {
				t.Fatal(err)
			}
			last += n
			if sync {
				synced = last
			}
		}
		s.Abandon()
		mode := []crashfs.CrashMode{crashfs.CrashDropAll, crashfs.CrashCut, crashfs.CrashSectors}[seed%3]
		if _, err := ffs.Crash(rng, mode); err != nil {
			t.Fatal(err)
		}
		s = openT(t, dir, ffs)
		li, _ := s.LastIndex()
		if li < synced || li > last {
			t.Fatalf("seed %d: last index %d after crash, synced %d, written %d", seed, li, synced, last)
		}
		if mode == crashfs.CrashDropAll && li != synced {
			t.Fatalf("seed %d: unsynced entries up to %d claimed after dropping every unsynced write (synced %d)", seed, li, synced)
		}
		checkLog(t, s, 2, li, func(uint64) uint64 { return 2 })
		s.Close()
	}
}

// TestStorageSIGKILL runs a child process that saves and syncs batches,
// printing the last synced index after each, kills it with SIGKILL at a
// random point, and checks that reopening keeps every index it printed.
func TestStorageSIGKILL(t *testing.T) {
	if dir := os.Getenv("FIBRIL_CLUSTER_CHILD"); dir != "" {
		storageChild(dir)
		return
	}
	for round := 0; round < 3; round++ {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestStorageSIGKILL$")
		cmd.Env = append(os.Environ(), "FIBRIL_CLUSTER_CHILD="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		acked := uint64(0)
		stopAt := uint64(50 + 100*round)
		deadline := time.Now().Add(10 * time.Second)
		for acked < stopAt && time.Now().Before(deadline) && sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "synced "); ok {
				acked, _ = strconv.ParseUint(v, 10, 64)
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
		if acked < stopAt {
			t.Fatalf("child reached only %d", acked)
		}
		s := openT(t, dir, nil)
		li, _ := s.LastIndex()
		if li < acked {
			t.Fatalf("round %d: last index %d after SIGKILL, child reported %d synced", round, li, acked)
		}
		checkLog(t, s, 2, li, func(uint64) uint64 { return 2 })
		s.Close()
	}
}

func storageChild(dir string) {
	s, err := OpenStorage(dir, nil)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	s.Bootstrap([]uint64{1})
	last := uint64(1)
	for i := 0; i < 100000; i++ {
		if err := s.Save(hardState(2, 1, last), ents(last+1, last+3, 2), nil, true); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		last += 3
		fmt.Printf("synced %d\n", last)
	}
	os.Exit(0)
}

// TestStorageUnsyncedSnapshotKeepsOldFile is the regression test for a
// received snapshot saved without sync: its mark could be lost in a crash
// after the older snapshot's file was removed, and Open then failed.
func TestStorageUnsyncedSnapshotKeepsOldFile(t *testing.T) {
	ffs := crashfs.New(seglog.OSFS())
	dir := t.TempDir()
	s := openT(t, dir, ffs)
	s.Bootstrap([]uint64{1, 2, 3})
	i, tm := uint64(50), uint64(3)
	recv := &pb.Snapshot{Data: []byte("x"), Metadata: &pb.SnapshotMetadata{Index: &i, Term: &tm, ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}
	if err := s.Save(nil, nil, recv, false); err != nil {
		t.Fatal(err)
	}
	s.Abandon()
	if _, err := ffs.Crash(nil, crashfs.CrashDropAll); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, ffs)
	defer s.Close()
	if fi, _ := s.FirstIndex(); fi != 51 {
		t.Fatalf("first index %d after crash, want 51", fi)
	}
}

func TestStorageBounds(t *testing.T) {
	s := openT(t, t.TempDir(), nil)
	defer s.Close()
	s.Bootstrap([]uint64{1})
	if err := s.Save(hardState(2, 1, 3), ents(2, 6, 2), nil, true); err != nil {
		t.Fatal(err)
	}
	one := uint64(proto.Size(ent(2, 2)))
	for _, c := range []struct {
		lo, hi, max uint64
		n           int
		err         error
	}{
		{2, 7, 1 << 20, 5, nil},
		{2, 7, 0, 1, nil},         // at least one entry
		{2, 7, 2*one + 1, 2, nil}, // no more than maxSize past the first
		{1, 3, 1 << 20, 0, raft.ErrCompacted},
		{3, 8, 1 << 20, 0, raft.ErrUnavailable},
	} {
		got, err := s.Entries(c.lo, c.hi, c.max)
		if !errors.Is(err, c.err) || len(got) != c.n {
			t.Errorf("Entries(%d, %d, %d) = %d entries, %v; want %d, %v", c.lo, c.hi, c.max, len(got), err, c.n, c.err)
		}
	}
	if _, err := s.Term(0); !errors.Is(err, raft.ErrCompacted) {
		t.Errorf("Term(0): %v", err)
	}
	if _, err := s.Term(7); !errors.Is(err, raft.ErrUnavailable) {
		t.Errorf("Term(7): %v", err)
	}
}

// TestStorageCommitBelowSnapshotRaised: the apply worker can snapshot at
// an index before the append worker saved a hard state committing it, so
// a hard state saved after the snapshot may name an older commit; after a
// reopen the commit index is the snapshot's (raft refuses to start with
// a commit below its snapshot).
func TestStorageCommitBelowSnapshotRaised(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, nil)
	if err := s.Save(hardState(1, 1, 2), ents(1, 10, 1), nil, true); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSnapshot(8, &pb.ConfState{Voters: []uint64{1}}, []byte("sm")); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(hardState(1, 1, 3), nil, nil, true); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*Storage{s, nil} {
		if st == nil {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			st = openT(t, dir, nil)
			defer st.Close()
		}
		hs, _, _ := st.InitialState()
		if hs.GetCommit() != 8 {
			t.Fatalf("commit %d after a hard state of commit 3 below snapshot 8, want 8", hs.GetCommit())
		}
	}
}
