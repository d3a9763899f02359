package seglog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// the damage change under Log.mu. Its parts: the map (segMap, segmap.go),
// the sparse index and what its file said (sparseIndex), the ranges lost
// to damage (damage), the reader's guess of where the next record starts
// (locateHint), and where its file goes once it leaves the log (afterlife).
type segment struct {
	path  string
	first Seq
	f     File  // open while the segment is active; nil once sealed
	size  int64 // bytes preallocated and mapped (the file's size as the log made it)
	limit int64 // the size the segment may grow to
	segMap
	// dirPending: the file was created and its directory entry is not
	// known durable yet; Log.syncSegment syncs the directory before the
	// first durable point in it is reported.
	dirPending atomic.Bool
	hint       locateHint

	end  int64 // offset just past the last valid record
	last Seq   // last sequence number held (first-1 when empty)
	sparseIndex
	damage

	// codec: the segment is a compressed file (path names it; data is
	// nil, size is the file's size, end the plain length): reads go
	// through Log.view. noComp: compression would not pay; keep it plain.
	codec  Compression
	noComp bool
	afterlife
}

// sparseIndex maps sequence numbers to record offsets, one entry per
// Options.IndexInterval bytes, and keeps what the segment's index file
// said at Open.
type sparseIndex struct {
	index       []indexEntry
	lastIndexed int64 // offset of the last index entry (-1 none)
	// idxLast: the last sequence number the index file named at Open (0:
	// no valid index), to tell a segment cut short from one deleted.
	idxLast Seq
	// idxDirty: Open changed what the segment's index must say (a scan
	// rebuilt it, or a skipped range was added) and must write it.
	idxDirty bool
}

// noIndex is the index of a segment nothing was indexed in yet.
func noIndex() sparseIndex { return sparseIndex{lastIndexed: -1} }

// addIndex records that seq starts at off if the index interval has passed
// (or force is set).
func (x *sparseIndex) addIndex(seq Seq, off int64, interval int, force bool) {
	if force || x.lastIndexed < 0 || off-x.lastIndexed >= int64(interval) {
		x.index = append(x.index, indexEntry{seq, off})
		x.lastIndexed = off
	}
}

// loadIndex takes entries (read from an index file) as the index.
func (x *sparseIndex) loadIndex(entries []indexEntry) {
	x.index = entries
	if n := len(entries); n > 0 {
		x.lastIndexed = entries[n-1].off
	}
}

// walkFrom returns the offset a walk to record seq starts at: the last
// index entry at or below seq, else the first record.
func (x *sparseIndex) walkFrom(seq Seq) int64 {
	i := sort.Search(len(x.index), func(i int) bool { return x.index[i].seq > seq }) - 1
	if i < 0 {
		return segHeaderSize
	}
	return x.index[i].off
}

// damage is what a segment lost: the ranges passed over with SkipCorrupt
// (its index file records them, see encodeIndex) and the sequence numbers
// they held, which reads report as corrupt.
type damage struct {
	holes   []seqRange
	skipped []SkippedRange
}

// locateHint is where the record after the last one located starts
// (locate's guess for forward reads). Readers share the log's read lock,
// hence its own mutex (a leaf lock).
type locateHint struct {
	mu  sync.Mutex
	seq Seq
	off int64
}

func (h *locateHint) get() (Seq, int64) {
	h.mu.Lock()
	seq, off := h.seq, h.off
	h.mu.Unlock()
	return seq, off
}

func (h *locateHint) set(seq Seq, off int64) {
	h.mu.Lock()
	h.seq, h.off = seq, off
	h.mu.Unlock()
}

// afterlife is where the segment's file goes once it leaves the log.
type afterlife struct {
	// swapNo: this is a plain segment the compressor replaced, the
	// swapNo-th replacement of the log (0: not replaced). Its map waits in
	// the graveyard (see Log.ReleaseSwapped).
	swapNo uint64
	// spare: TruncateFront renamed the file to this spare path; once the
	// map is released a roll may reuse it (recycle.go).
	spare string
	// trash: TruncateFront renamed the file to this trash path, to be
	// deleted gradually once its map is released (see deleteGradually).
	trash string
}

// skip records a damaged range passed over with SkipCorrupt: its
// sequence numbers (if any) become a hole that reads report as corrupt.
func (d *damage) skip(r SkippedRange) {
	d.skipped = append(d.skipped, r)
	if r.From <= r.To {
		d.holes = append(d.holes, seqRange{r.From, r.To})
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
	s := &segment{path: path, first: first, f: f, size: size, limit: limit, end: segHeaderSize, last: first - 1, sparseIndex: noIndex()}
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

// inHole reports whether seq lies in a range skipped as damaged.
func (d *damage) inHole(seq Seq) bool {
	for _, h := range d.holes {
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
	hseq, hoff := s.hint.get()
	if hseq == seq && hoff > 0 && hoff < s.end {
		hoff = pastSide(s.data[:s.end], hoff)
	}
	if hseq == seq && hoff > 0 && hoff < s.end {
		if h, st := checkRecord(s.data[:s.end], hoff); st == recOK && h.seq == seq {
			s.hint.set(seq+1, hoff+h.size())
			return hoff, h, nil
		}
	}
	off, h, err := s.search(seq)
	if err == nil {
		s.hint.set(seq+1, off+h.size())
	}
	return off, h, err
}

// search is locate without the hint.
func (s *segment) search(seq Seq) (int64, recHeader, error) {
	off := s.walkFrom(seq)
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
