package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/fibrilmq/fibril/server/seglog"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Record kinds, the first byte of a seglog record's Meta.
const (
	kindEntry     byte = 1 // data: a marshalled pb.Entry
	kindHardState byte = 2 // data: a marshalled pb.HardState
	kindSnapshot  byte = 3 // data: pb.SnapshotMetadata of a snapshot received: drops every entry
	kindCompact   byte = 4 // data: pb.SnapshotMetadata of a local snapshot: drops entries up to its index
)

// ErrCorrupt reports a raft log directory whose records contradict each
// other (a gap in the entries, a snapshot file missing).
var ErrCorrupt = errors.New("cluster: corrupt raft storage")

// slot is what memory keeps of one live entry: where it is and its term.
type slot struct {
	seq  seglog.Seq
	term uint64
}

// Storage is a durable raft.Storage: one directory holding a seglog log
// of records (entries, hard states, snapshot marks, replayed in order at
// Open, a later entry at index i replacing every entry from i on) and
// the snapshot files (snap/%020d.snap, written temp -> fsync -> rename).
// Save makes a Ready's state durable; reads are served from the log.
// Safe for concurrent use.
type Storage struct {
	mu    sync.Mutex
	dir   string
	log   *seglog.Log
	hs    *pb.HardState
	snap  *pb.Snapshot
	first uint64 // index of ents[0]: the snapshot index + 1
	ents  []slot
}

var _ raft.Storage = (*Storage)(nil)

// OpenStorage opens (or creates) the raft storage in dir. fsys is passed
// to the log (nil: the operating system's; tests pass a *seglog.FaultFS).
// It replays every record the log recovered and loads the snapshot they
// name; it fails wrapping ErrCorrupt when they do not fit together.
func OpenStorage(dir string, fsys seglog.FS) (*Storage, error) {
	if err := os.MkdirAll(filepath.Join(dir, "snap"), 0o755); err != nil {
		return nil, fmt.Errorf("cluster: open storage %s: %w", dir, err)
	}
	l, err := seglog.Open(filepath.Join(dir, "log"), seglog.Options{Policy: seglog.PolicyCaller, FS: fsys, SegmentSize: raftSegmentSize})
	if err != nil {
		return nil, fmt.Errorf("cluster: open raft log in %s: %w", dir, err)
	}
	s := &Storage{dir: dir, log: l, hs: &pb.HardState{}, snap: pb.EnsureSnapshot(nil), first: 1}
	err = s.replayAll()
	if err == nil {
		err = s.loadSnapshot()
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("cluster: open storage %s: %w", dir, err)
	}
	return s, nil
}

// replayAll rebuilds the in-memory view from the log. TruncateFront
// keeps whole segments only, so the log may start with records that were
// superseded before the latest snapshot mark: a first pass finds that
// mark, and the replay starts from it (a received snapshot) or from the
// first entry live when it was written (a compaction, which names it).
func (s *Storage) replayAll() error {
	first, _ := s.log.Bounds()
	var mark seglog.Seq
	var markMeta, markData []byte
	err := s.log.Scan(first, 0, func(r seglog.Record) bool {
		if len(r.Meta) > 0 && (r.Meta[0] == kindSnapshot || r.Meta[0] == kindCompact) {
			mark = r.Seq
			markMeta = append([]byte(nil), r.Meta...)
			markData = append([]byte(nil), r.Data...)
		}
		return true
	})
	if err != nil {
		return err
	}
	start := first
	if mark != 0 {
		if err := s.replay(mark, markMeta, markData); err != nil {
			return err
		}
		start = mark + 1
		if markMeta[0] == kindCompact {
			if keep := compactKeep(markMeta); keep != 0 {
				start = keep
			}
		}
	}
	var rerr error
	err = s.log.Scan(start, 0, func(r seglog.Record) bool {
		if r.Seq == mark {
			return true
		}
		rerr = s.replay(r.Seq, r.Meta, r.Data)
		return rerr == nil
	})
	if rerr != nil {
		return rerr
	}
	return err
}

// compactKeep returns the sequence number a compact mark's meta names:
// that of the first entry still live when it was written (0: none).
func compactKeep(meta []byte) seglog.Seq {
	if len(meta) != 9 {
		return 0
	}
	return seglog.Seq(binary.LittleEndian.Uint64(meta[1:]))
}

// replay applies one record to the in-memory view.
func (s *Storage) replay(seq seglog.Seq, meta, data []byte) error {
	if len(meta) != 1 && !(len(meta) == 9 && meta[0] == kindCompact) {
		return fmt.Errorf("%w: record %d has meta of %d bytes", ErrCorrupt, seq, len(meta))
	}
	switch meta[0] {
	case kindEntry:
		var e pb.Entry
		if err := proto.Unmarshal(data, &e); err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrCorrupt, seq, err)
		}
		i := e.GetIndex()
		if i < s.first {
			return nil // covered by the snapshot
		}
		if i > s.first+uint64(len(s.ents)) {
			return fmt.Errorf("%w: record %d holds entry %d after entry %d", ErrCorrupt, seq, i, s.first+uint64(len(s.ents))-1)
		}
		s.ents = append(s.ents[:i-s.first], slot{seq: seq, term: e.GetTerm()})
	case kindHardState:
		hs := &pb.HardState{}
		if err := proto.Unmarshal(data, hs); err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrCorrupt, seq, err)
		}
		// With asynchronous writes a hard state saved after a local
		// snapshot can predate it (the apply worker ran ahead of the
		// append worker): the snapshot's entries are committed, so its
		// index is a floor for the commit index.
		if snapIdx := s.first - 1; hs.GetCommit() < snapIdx {
			hs.Commit = &snapIdx
		}
		s.hs = hs
	case kindSnapshot, kindCompact:
		m := &pb.SnapshotMetadata{}
		if err := proto.Unmarshal(data, m); err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrCorrupt, seq, err)
		}
		idx := m.GetIndex()
		if idx+1 < s.first {
			return nil // older than the snapshot already known
		}
		if meta[0] == kindSnapshot || idx+1 >= s.first+uint64(len(s.ents)) {
			s.ents = nil
		} else if idx >= s.first {
			s.ents = append([]slot(nil), s.ents[idx+1-s.first:]...)
		}
		s.first = idx + 1
		s.snap = &pb.Snapshot{Metadata: m}
	default:
		return fmt.Errorf("%w: record %d has kind %d", ErrCorrupt, seq, meta[0])
	}
	return nil
}

func snapName(index uint64) string { return fmt.Sprintf("%020d.snap", index) }

// loadSnapshot reads the data of the snapshot the records named and
// removes every other snapshot file (older: superseded; newer: written
// before a crash that lost its mark).
func (s *Storage) loadSnapshot() error {
	idx := s.snap.GetMetadata().GetIndex()
	dir := filepath.Join(s.dir, "snap")
	names, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if n.Name() != snapName(idx) {
			os.Remove(filepath.Join(dir, n.Name()))
		}
	}
	if idx == 0 {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, snapName(idx)))
	if err != nil {
		return fmt.Errorf("%w: snapshot %d: %v", ErrCorrupt, idx, err)
	}
	if len(b) < 4 || crc32.ChecksumIEEE(b[4:]) != uint32(b[0])|uint32(b[1])<<8|uint32(b[2])<<16|uint32(b[3])<<24 {
		return fmt.Errorf("%w: snapshot file %s: bad checksum", ErrCorrupt, snapName(idx))
	}
	snap := &pb.Snapshot{}
	if err := proto.Unmarshal(b[4:], snap); err != nil {
		return fmt.Errorf("%w: snapshot file %s: %v", ErrCorrupt, snapName(idx), err)
	}
	s.snap = snap
	return nil
}

// writeSnapFile writes snap durably: temp file, fsync, rename, dir fsync.
func (s *Storage) writeSnapFile(snap *pb.Snapshot) error {
	body, err := proto.Marshal(snap)
	if err != nil {
		return err
	}
	c := crc32.ChecksumIEEE(body)
	b := append([]byte{byte(c), byte(c >> 8), byte(c >> 16), byte(c >> 24)}, body...)
	dir := filepath.Join(s.dir, "snap")
	tmp := filepath.Join(dir, snapName(snap.GetMetadata().GetIndex())+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, snapName(snap.GetMetadata().GetIndex())))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cluster: write snapshot %d: %w", snap.GetMetadata().GetIndex(), err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	d.Close()
	return err
}

// removeSnapsBelow deletes snapshot files older than index.
func (s *Storage) removeSnapsBelow(index uint64) {
	dir := filepath.Join(s.dir, "snap")
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		if strings.HasSuffix(n.Name(), ".snap") && n.Name() < snapName(index) {
			os.Remove(filepath.Join(dir, n.Name()))
		}
	}
}

// Save makes one Ready's state durable, in raft's order: the snapshot
// (its file first, then its mark), the entries, the hard state, all in one
// log batch so a crash keeps a prefix of it. With sync it returns once the
// batch is fsynced (raft's MustSync). The fsync runs without the
// storage's lock, so raft's reads of earlier entries go on meanwhile.
// Saves must not run concurrently with each other (one append worker
// makes them). On error the storage must not be used again: close it and
// reopen.
func (s *Storage) Save(hs *pb.HardState, ents []*pb.Entry, snap *pb.Snapshot, sync bool) error {
	hasSnap := snap != nil && !raft.IsEmptySnap(snap)
	if err := s.write(hs, ents, snap, hasSnap); err != nil {
		return err
	}
	// A snapshot's mark is synced before older snapshot files go, so a
	// crash never leaves a mark whose file was removed.
	if sync || hasSnap {
		if _, err := s.log.Sync(); err != nil {
			return fmt.Errorf("cluster: sync raft log: %w", err)
		}
	}
	if hasSnap {
		s.mu.Lock()
		s.removeSnapsBelow(snap.GetMetadata().GetIndex())
		s.mu.Unlock()
	}
	return nil
}

// write is Save's part under the lock: it writes the records and
// replays them into memory.
func (s *Storage) write(hs *pb.HardState, ents []*pb.Entry, snap *pb.Snapshot, hasSnap bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var batch []seglog.Entry
	add := func(kind byte, m proto.Message) error {
		b, err := proto.Marshal(m)
		if err != nil {
			return fmt.Errorf("cluster: save: %w", err)
		}
		batch = append(batch, seglog.Entry{Meta: []byte{kind}, Data: b})
		return nil
	}
	if hasSnap {
		if err := s.writeSnapFile(snap); err != nil {
			return err
		}
		if err := add(kindSnapshot, snap.GetMetadata()); err != nil {
			return err
		}
	}
	for _, e := range ents {
		if err := add(kindEntry, e); err != nil {
			return err
		}
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		if err := add(kindHardState, hs); err != nil {
			return err
		}
	}
	if err := s.appendLocked(batch, false); err != nil {
		return err
	}
	if hasSnap {
		s.snap = snap
	}
	return nil
}

// appendLocked writes batch, syncs it if asked, and replays it into memory.
func (s *Storage) appendLocked(batch []seglog.Entry, sync bool) error {
	if len(batch) == 0 {
		return nil
	}
	seq, err := s.log.Append(batch)
	if err != nil {
		return fmt.Errorf("cluster: save %d records: %w", len(batch), err)
	}
	if sync {
		if _, err := s.log.Sync(); err != nil {
			return fmt.Errorf("cluster: sync raft log: %w", err)
		}
	}
	for i, e := range batch {
		if err := s.replay(seq+seglog.Seq(i), e.Meta, e.Data); err != nil {
			return err
		}
	}
	return nil
}

// CreateSnapshot records a snapshot of the state machine at index (which
// must be applied, hence committed and in the log) with conf state cs and
// data, and compacts the log up to it: the file is written, its mark and
// the current hard state are appended and fsynced, then whole log
// segments below the first live entry are dropped. It returns
// raft.ErrSnapOutOfDate for an index at or below the current snapshot.
func (s *Storage) CreateSnapshot(index uint64, cs *pb.ConfState, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index < s.first {
		return raft.ErrSnapOutOfDate
	}
	if index >= s.first+uint64(len(s.ents)) {
		return fmt.Errorf("cluster: snapshot at %d past the last index %d", index, s.first+uint64(len(s.ents))-1)
	}
	term := s.ents[index-s.first].term
	snap := &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{Index: &index, Term: &term, ConfState: cs}}
	if err := s.writeSnapFile(snap); err != nil {
		return err
	}
	mb, err := proto.Marshal(snap.GetMetadata())
	if err != nil {
		return err
	}
	hb, err := proto.Marshal(s.hs)
	if err != nil {
		return err
	}
	// The hard state is written again because the record that held it may
	// sit in a segment the truncation below drops.
	cmeta := []byte{kindCompact, 0, 0, 0, 0, 0, 0, 0, 0}
	if index+1 < s.first+uint64(len(s.ents)) {
		binary.LittleEndian.PutUint64(cmeta[1:], uint64(s.ents[index+1-s.first].seq))
	}
	batch := []seglog.Entry{{Meta: cmeta, Data: mb}, {Meta: []byte{kindHardState}, Data: hb}}
	if err := s.appendLocked(batch, true); err != nil {
		return err
	}
	s.snap = snap
	s.removeSnapsBelow(index)
	_, keep := s.log.Bounds()
	keep-- // the compact mark and the hard state after it stay
	if len(s.ents) > 0 {
		keep = s.ents[0].seq
	}
	if err := s.log.TruncateFront(keep); err != nil {
		return fmt.Errorf("cluster: compact raft log below %d: %w", index, err)
	}
	return nil
}

// Sync makes every record saved so far durable.
func (s *Storage) Sync() error {
	if _, err := s.log.Sync(); err != nil {
		return fmt.Errorf("cluster: sync raft log: %w", err)
	}
	return nil
}

// commitAtLeast raises the hard state's commit index to index in memory
// (see resume); the next hard state raft saves carries it.
func (s *Storage) commitAtLeast(index uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hs.GetCommit() < index {
		s.hs = proto.CloneOf(s.hs)
		s.hs.Commit = &index
	}
}

// InitialState returns the saved hard state and the snapshot's conf state.
func (s *Storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return proto.CloneOf(s.hs), pb.EnsureConfState(proto.CloneOf(s.snap.GetMetadata().GetConfState())), nil
}

// Entries returns entries [lo, hi), at least one, at most maxSize bytes
// of them past the first, read from the log (each a fresh copy).
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lo < s.first {
		return nil, raft.ErrCompacted
	}
	if hi > s.first+uint64(len(s.ents)) {
		return nil, raft.ErrUnavailable
	}
	var out []*pb.Entry
	var size uint64
	for i := lo; i < hi; i++ {
		r, err := s.log.Read(s.ents[i-s.first].seq)
		if err != nil {
			return nil, fmt.Errorf("cluster: read entry %d: %w", i, err)
		}
		e := &pb.Entry{}
		if err := proto.Unmarshal(r.Data, e); err != nil {
			return nil, fmt.Errorf("%w: entry %d: %v", ErrCorrupt, i, err)
		}
		size += uint64(proto.Size(e))
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// Term returns the term of entry i, for i in [FirstIndex()-1, LastIndex()].
func (s *Storage) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case i+1 == s.first:
		return s.snap.GetMetadata().GetTerm(), nil
	case i+1 < s.first:
		return 0, raft.ErrCompacted
	case i >= s.first+uint64(len(s.ents)):
		return 0, raft.ErrUnavailable
	}
	return s.ents[i-s.first].term, nil
}

// LastIndex returns the index of the last entry (the snapshot's if none).
func (s *Storage) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first + uint64(len(s.ents)) - 1, nil
}

// FirstIndex returns the index of the first entry held.
func (s *Storage) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first, nil
}

// Snapshot returns the latest snapshot.
func (s *Storage) Snapshot() (*pb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap, nil
}

// Close syncs and closes the log.
func (s *Storage) Close() error { return s.log.Close() }

// Abandon drops the log without syncing, as a crash would (for tests
// with a *seglog.FaultFS).
func (s *Storage) Abandon() { s.log.Abandon() }

// Bootstrap gives a new, empty storage its first conf state: a snapshot
// at index 1, term 1 with no data, as etcd-io/raft recommends over
// RawNode.Bootstrap. Every replica of a new group bootstraps with the
// same voters. It fails on a storage that already holds anything.
func (s *Storage) Bootstrap(voters []uint64) error {
	s.mu.Lock()
	empty := s.first == 1 && len(s.ents) == 0 && raft.IsEmptyHardState(s.hs)
	s.mu.Unlock()
	if !empty {
		return fmt.Errorf("cluster: bootstrap %s: storage is not empty", s.dir)
	}
	one := uint64(1)
	snap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: &one, Term: &one, ConfState: &pb.ConfState{Voters: voters}}}
	return s.Save(nil, nil, snap, true)
}
