package seglog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Segment file layout: a 32-byte header, then records from offset 32 on.
//
//	0  [8]byte magic "FBRLSEG1"
//	8  uint64  first sequence number (also the file name)
//	16 uint64  size limit when created (informational)
//	24 uint32  reserved (0)
//	28 uint32  CRC-32 (IEEE) of bytes 0..28
const (
	segHeaderSize = 32
	segMagic      = "FBRLSEG1"
	segExt        = ".seg"
	idxExt        = ".idx"
	tmpExt        = ".tmp"
)

// indexEntry maps a sequence number to the offset of its record.
type indexEntry struct {
	seq Seq
	off int64
}

// seqRange is an inclusive range of sequence numbers.
type seqRange struct{ from, to Seq }

// initialAlloc is how much of a segment started by a roll is preallocated at
// first; the active segment then grows by doubling (fallocate, then a wider
// map) as appends reach the allocated end, up to its limit
// (Options.SegmentSize). firstAlloc is the same for the first segment of a
// new log: a log with few records so holds 16 KiB of disk, not a whole
// segment nor 1 MiB (10,000 one-message topics took 20 GiB at 1 MiB a log),
// while a log that has rolled once is busy and starts its next segments
// larger, with fewer grows.
const (
	initialAlloc = 1 << 20
	firstAlloc   = 16 << 10
)

// segment is one segment file. first and path never change; f is closed
// (under Log.rel.mu) when the segment is sealed; size and data grow (under
// Log.mu, by the writer) while the segment is active; end, last, index and
// holes change under Log.mu.
//
// The segment reserves limit bytes of address space (PROT_NONE, no memory)
// when it is mapped, and maps the file into the start of that range as the
// file grows, so the addresses of mapped records never change (borrowed
// Record slices stay valid) and nothing is ever mapped past the end of the
// file.
type segment struct {
	path string
	// swapNo: this is a plain segment the compressor replaced, the
	// swapNo-th replacement of the log (0: not replaced). Its map waits in
	// the graveyard (see Log.ReleaseSwapped).
	swapNo   uint64
	first    Seq
	f        File   // open while the segment is active; nil once sealed
	size     int64  // bytes preallocated and mapped (the file's size as the log made it)
	limit    int64  // the size the segment may grow to
	data     []byte // the mapped file, read-only (len == size, cap == limit)
	base     unsafe.Pointer
	resv     uintptr // bytes reserved at base (limit rounded up to pages)
	writable bool    // the windows are mapped writable (writeViaMap)
	// dirPending: the file was created and its directory entry is not
	// known durable yet; Log.syncSegment syncs the directory before the
	// first durable point in it is reported.
	dirPending atomic.Bool

	// hintSeq/hintOff: where the record after the last one located
	// starts (locate's guess for forward reads). Readers share the log's
	// read lock, hence the mutex.
	hintMu  sync.Mutex
	hintSeq Seq
	hintOff int64

	end         int64 // offset just past the last valid record
	last        Seq   // last sequence number held (first-1 when empty)
	index       []indexEntry
	lastIndexed int64 // offset of the last index entry (-1 none)
	holes       []seqRange
	// skipped lists the damaged ranges of this segment passed over with
	// SkipCorrupt; its index file records them (see encodeIndex).
	skipped []SkippedRange
	// idxLast: the last sequence number the index file named at Open (0:
	// no valid index), to tell a segment cut short from one deleted.
	idxLast Seq
	// idxDirty: Open changed what the segment's index must say (a scan
	// rebuilt it, or a skipped range was added) and must write it.
	idxDirty bool

	// codec: the segment is a compressed file (path names it; data is
	// nil, size is the file's size, end the plain length): reads go
	// through Log.view. noComp: compression would not pay; keep it plain.
	codec  Compression
	noComp bool
	// spare: TruncateFront renamed the file to this spare path; once the
	// map is released a roll may reuse it (recycle.go).
	spare string
	// trash: TruncateFront renamed the file to this trash path, to be
	// deleted gradually once its map is released (see deleteGradually).
	trash string
}

// skip records a damaged range of s passed over with SkipCorrupt: its
// sequence numbers (if any) become a hole that reads report as corrupt.
func (s *segment) skip(r SkippedRange) {
	s.skipped = append(s.skipped, r)
	if r.From <= r.To {
		s.holes = append(s.holes, seqRange{r.From, r.To})
	}
}

func segName(first Seq) string { return fmt.Sprintf("%020d", uint64(first)) + segExt }

// parseSegName returns the first sequence number a segment file name holds.
func parseSegName(name string) (Seq, bool) {
	base, ok := strings.CutSuffix(name, segExt)
	if !ok || len(base) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(base, 10, 64)
	if err != nil || n == 0 {
		return 0, false
	}
	return Seq(n), true
}

func encodeSegHeader(first Seq, size int64) []byte {
	b := make([]byte, segHeaderSize)
	copy(b, segMagic)
	binary.LittleEndian.PutUint64(b[8:], uint64(first))
	binary.LittleEndian.PutUint64(b[16:], uint64(size))
	binary.LittleEndian.PutUint32(b[28:], crc32.ChecksumIEEE(b[:28]))
	return b
}

// checkSegHeader reports whether b starts with a valid header for first.
func checkSegHeader(b []byte, first Seq) bool {
	if len(b) < segHeaderSize || string(b[:8]) != segMagic {
		return false
	}
	return crc32.ChecksumIEEE(b[:28]) == binary.LittleEndian.Uint32(b[28:]) &&
		Seq(binary.LittleEndian.Uint64(b[8:])) == first
}

// staleSegHeader reports whether b starts with a valid header of a segment
// numbered below first: a reused spare whose new header never reached the
// disk.
func staleSegHeader(b []byte, first Seq) bool {
	if len(b) < segHeaderSize || string(b[:8]) != segMagic || crc32.ChecksumIEEE(b[:28]) != binary.LittleEndian.Uint32(b[28:]) {
		return false
	}
	return Seq(binary.LittleEndian.Uint64(b[8:])) < first
}

// createSegment creates, preallocates (alloc bytes, or limit if smaller),
// stamps and maps a new empty segment that may grow to limit bytes. Nothing
// is synced: the directory entry is made durable by Log.syncSegment before
// any record of the segment is reported durable, so creating a log (or a
// segment nobody writes to) costs no fsync. On failure it leaves no file
// behind (best effort).
func createSegment(fsys FS, dir string, first Seq, alloc, limit int64, writable bool) (*segment, error) {
	path := filepath.Join(dir, segName(first))
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: create segment: %w", ErrWriteFailed, err)
	}
	size := min(alloc, limit)
	if err := f.Allocate(0, size); err != nil {
		// A nearly full disk: start with one page (the header); appends
		// then allocate what they need (Log.grow).
		size = min(pageRound(segHeaderSize), limit)
		if f.Allocate(0, size) != nil {
			return failSegment(fsys, f, path, "create segment", err)
		}
	}
	return stampSegment(fsys, f, path, "create segment", first, size, limit, writable)
}

// stampSegment makes the new empty segment first out of the open file f
// (size bytes allocated, limit the most it may grow to): header, map,
// directory entry pending. On failure f is closed and the file removed.
func stampSegment(fsys FS, f File, path, what string, first Seq, size, limit int64, writable bool) (*segment, error) {
	if _, err := f.WriteAt(encodeSegHeader(first, limit), 0); err != nil {
		return failSegment(fsys, f, path, what, err)
	}
	s := &segment{path: path, first: first, f: f, size: size, limit: limit, end: segHeaderSize, last: first - 1, lastIndexed: -1}
	if err := s.mapFile(writable); err != nil {
		return failSegment(fsys, f, path, what, err)
	}
	s.dirPending.Store(true)
	return s, nil
}

// failSegment closes and removes a segment file that could not be made.
func failSegment(fsys FS, f File, path, what string, err error) (*segment, error) {
	f.Close()
	fsys.Remove(path)
	return nil, fmt.Errorf("%w: %s %s: %w", ErrWriteFailed, what, path, err)
}

// mapFile reserves limit bytes of address space and maps the first size
// bytes of the file there. The file must be that long: the log never maps
// past the end of a file, so a read can fault only if someone else shrinks
// the file (and that fault becomes an error, see guard).
func (s *segment) mapFile(writable bool) error {
	s.writable = writable
	if s.limit == 0 {
		return nil
	}
	pg := uintptr(os.Getpagesize())
	resv := (uintptr(s.limit) + pg - 1) &^ (pg - 1)
	p, err := unix.MmapPtr(-1, 0, nil, resv, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return fmt.Errorf("reserve %d bytes for %s: %w", resv, s.path, err)
	}
	s.base, s.resv = p, resv
	s.data = unsafe.Slice((*byte)(p), s.limit)[:0]
	if err := s.mapWindow(0, s.size); err != nil {
		unix.MunmapPtr(s.base, s.resv)
		s.base, s.resv, s.data = nil, 0, nil
		return err
	}
	s.data = s.data[:s.size]
	return nil
}

// mapWindow maps file bytes [from, to) at their place in the reservation
// (from is rounded down to a page; the bytes already mapped there are
// mapped again, to the same file pages). The caller publishes the new
// length of data.
func (s *segment) mapWindow(from, to int64) error {
	from &^= int64(os.Getpagesize() - 1)
	if to <= from {
		return nil
	}
	prot := unix.PROT_READ
	if s.writable {
		prot |= unix.PROT_WRITE
	}
	if _, err := unix.MmapPtr(int(s.f.Fd()), from, unsafe.Add(s.base, from), uintptr(to-from), prot, unix.MAP_SHARED|unix.MAP_FIXED); err != nil {
		return fmt.Errorf("mmap %s [%d, %d): %w", s.path, from, to, err)
	}
	return nil
}

// release unmaps and closes the segment.
func (s *segment) release() error {
	var err error
	if s.base != nil {
		err = unix.MunmapPtr(s.base, s.resv)
		s.base, s.resv, s.data = nil, 0, nil
	}
	if s.f != nil {
		if cerr := s.f.Close(); err == nil {
			err = cerr
		}
		s.f = nil
	}
	return err
}

// addIndex records that seq starts at off if the index interval has passed
// (or force is set).
func (s *segment) addIndex(seq Seq, off int64, interval int, force bool) {
	if force || s.lastIndexed < 0 || off-s.lastIndexed >= int64(interval) {
		s.index = append(s.index, indexEntry{seq, off})
		s.lastIndexed = off
	}
}

// inHole reports whether seq lies in a range skipped as damaged.
func (s *segment) inHole(seq Seq) bool {
	for _, h := range s.holes {
		if seq >= h.from && seq <= h.to {
			return true
		}
	}
	return false
}

// locate returns the offset of record seq, which must be in [first, last]:
// a binary search in the sparse index, then a short walk. It returns an
// error wrapping ErrCorrupt when the walk meets damage.
func (s *segment) locate(seq Seq) (int64, recHeader, error) {
	// Consumers read forward: the record after the one located last
	// starts where that one ended. The hint is only a guess; the record
	// found there is checked like any other.
	s.hintMu.Lock()
	hseq, hoff := s.hintSeq, s.hintOff
	s.hintMu.Unlock()
	if hseq == seq && hoff > 0 && hoff < s.end {
		hoff = pastSide(s.data[:s.end], hoff)
	}
	if hseq == seq && hoff > 0 && hoff < s.end {
		if h, st := checkRecord(s.data[:s.end], hoff); st == recOK && h.seq == seq {
			s.setHint(seq+1, hoff+h.size())
			return hoff, h, nil
		}
	}
	off, h, err := s.search(seq)
	if err == nil {
		s.setHint(seq+1, off+h.size())
	}
	return off, h, err
}

func (s *segment) setHint(seq Seq, off int64) {
	s.hintMu.Lock()
	s.hintSeq, s.hintOff = seq, off
	s.hintMu.Unlock()
}

// search is locate without the hint.
func (s *segment) search(seq Seq) (int64, recHeader, error) {
	i := sort.Search(len(s.index), func(i int) bool { return s.index[i].seq > seq }) - 1
	off := int64(segHeaderSize)
	if i >= 0 {
		off = s.index[i].off
	}
	for off < s.end {
		// Records passed on the way are checked by header only; the one
		// returned has its data checksum verified too.
		h, st := checkRecordData(s.data[:s.end], off, false)
		if st == recOK && h.side() {
			off += h.size()
			continue
		}
		if st == recOK && h.seq == seq {
			h, st = checkRecord(s.data[:s.end], off)
		}
		if st != recOK {
			// A damaged record on the way costs only itself: the walk
			// goes on at the next intact record (its lengths come from
			// that record, never from the damaged header). Only when
			// that record is past seq does seq lie in the damage.
			p, ph, found := findNextRecord(s.data[:s.end], off+recAlign, seq)
			if found && ph.seq == seq {
				off = p
				continue
			}
			return 0, h, &CorruptError{Path: s.path, Offset: off, Seq: seq, Reason: st.String()}
		}
		if h.seq == seq {
			return off, h, nil
		}
		if h.seq > seq {
			break
		}
		off += h.size()
	}
	return 0, recHeader{}, &CorruptError{Path: s.path, Offset: off, Seq: seq, Reason: "record missing (damaged range)"}
}

// guard turns a memory fault on a mapped read (the file was shrunk behind
// our back) into an error instead of a crash. Use as
//
//	defer unguard(&err, path, guard())
//
// at the top of any function touching a map (a plain deferred call: no
// closure is allocated on the read path).
func guard() (old bool) { return debug.SetPanicOnFault(true) }

// unguard ends what guard started; it must be the deferred call itself
// (recover works only there).
func unguard(err *error, path string, old bool) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		var re interface{ Addr() uintptr }
		rerr, isErr := r.(error)
		if isErr && errors.As(rerr, &re) {
			*err = &CorruptError{Path: path, Reason: fmt.Sprintf("memory fault reading the map (file shrunk?): %v", r)}
			return
		}
		panic(r)
	}
}

func (st recStatus) String() string {
	switch st {
	case recOK:
		return "ok"
	case recZero:
		return "unexpected end of data"
	case recBadHdr:
		return "header checksum mismatch"
	case recBadData:
		return "data checksum mismatch"
	case recOutOfMap:
		return "record runs past the end of the segment"
	}
	return "unknown"
}
