package seglog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// Sparse index file (%020d.idx), written (without fsync) when a segment is
// sealed and, for the active segment, at a clean Close. It is a hint that
// spares a scan, never trusted when an intact record follows its end:
// every record it points at is still verified when read, and a missing or
// damaged index is rebuilt by scanning the segment.
//
//	0  [8]byte magic "FBRLIDX1"
//	8  uint64  first sequence number of the segment
//	16 uint64  last sequence number
//	24 uint64  end offset of the records
//	32 uint64  number of entries n
//	40 n × (uint64 seq, uint64 offset)
//	.. uint32  CRC-32 (IEEE) of everything before
//
// A segment with damaged ranges skipped by SkipCorrupt gets magic
// "FBRLIDX2" and, between the entries and the CRC, the ranges lost:
//
//	.. uint64  number of ranges m
//	.. m × (uint64 offset, uint64 length, uint64 from, uint64 to)
//
// so a later Open takes the segment as it was recovered, without
// SkipCorrupt, and reports the ranges again (SkippedRange.Recorded).
//
// Clean-shutdown marker (CLEAN): written by Close (without fsync) after the
// final sync, and removed (durably) before the first write after Open;
// while it is present and agrees with the last segment's index, Open skips
// the tail scan.
//
//	0  [8]byte magic "FBRLCLN1"
//	8  uint64  first sequence number of the last segment
//	16 uint64  last sequence number
//	24 uint64  end offset in the last segment
//	32 uint32  CRC-32 (IEEE) of bytes 0..32
const (
	idxMagic   = "FBRLIDX1"
	idxMagic2  = "FBRLIDX2"
	cleanMagic = "FBRLCLN1"
	cleanName  = "CLEAN"
	lockName   = "LOCK"
)

// savedIndex is a decoded index file.
type savedIndex struct {
	first, last Seq
	end         int64
	entries     []indexEntry
	skipped     []SkippedRange // Path left empty
}

func encodeIndex(s *segment) []byte {
	b := make([]byte, 40, 40+16*len(s.index)+8+32*len(s.skipped)+4)
	copy(b, idxMagic)
	if len(s.skipped) > 0 {
		copy(b, idxMagic2)
	}
	binary.LittleEndian.PutUint64(b[8:], uint64(s.first))
	binary.LittleEndian.PutUint64(b[16:], uint64(s.last))
	binary.LittleEndian.PutUint64(b[24:], uint64(s.end))
	binary.LittleEndian.PutUint64(b[32:], uint64(len(s.index)))
	for _, e := range s.index {
		b = binary.LittleEndian.AppendUint64(b, uint64(e.seq))
		b = binary.LittleEndian.AppendUint64(b, uint64(e.off))
	}
	if len(s.skipped) > 0 {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(s.skipped)))
		for _, r := range s.skipped {
			b = binary.LittleEndian.AppendUint64(b, uint64(r.Offset))
			b = binary.LittleEndian.AppendUint64(b, uint64(r.Length))
			b = binary.LittleEndian.AppendUint64(b, uint64(r.From))
			b = binary.LittleEndian.AppendUint64(b, uint64(r.To))
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// decodeIndex parses an index file for a segment starting at first whose
// mapped size is size. It returns ok == false for anything inconsistent.
func decodeIndex(b []byte, first Seq, size int64) (savedIndex, bool) {
	if len(b) < 44 || (string(b[:8]) != idxMagic && string(b[:8]) != idxMagic2) {
		return savedIndex{}, false
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return savedIndex{}, false
	}
	var rest []byte // the skipped ranges (FBRLIDX2)
	if string(b[:8]) == idxMagic2 {
		n := binary.LittleEndian.Uint64(b[32:])
		if n > uint64(len(body)-40)/16 {
			return savedIndex{}, false
		}
		body, rest = body[:40+16*n], body[40+16*n:]
	}
	x := savedIndex{
		first: Seq(binary.LittleEndian.Uint64(b[8:])),
		last:  Seq(binary.LittleEndian.Uint64(b[16:])),
		end:   int64(binary.LittleEndian.Uint64(b[24:])),
	}
	n := binary.LittleEndian.Uint64(b[32:])
	if x.first != first || x.last < first-1 || x.end < segHeaderSize || x.end > size || n != uint64(len(body)-40)/16 || uint64(len(body)-40)%16 != 0 {
		return savedIndex{}, false
	}
	prev := indexEntry{seq: first - 1, off: segHeaderSize - 1}
	for i := uint64(0); i < n; i++ {
		e := indexEntry{
			seq: Seq(binary.LittleEndian.Uint64(body[40+16*i:])),
			off: int64(binary.LittleEndian.Uint64(body[48+16*i:])),
		}
		if e.seq <= prev.seq || e.off <= prev.off || e.seq > x.last || e.off >= x.end || e.off%recAlign != 0 {
			return savedIndex{}, false
		}
		x.entries = append(x.entries, e)
		prev = e
	}
	if string(b[:8]) == idxMagic2 {
		var ok bool
		if x.skipped, ok = decodeSkipped(rest, x, size); !ok {
			return savedIndex{}, false
		}
	}
	return x, true
}

// decodeSkipped parses the skipped ranges of an FBRLIDX2 index: at least
// one, in ascending order, inside the segment, their sequence numbers
// within it.
func decodeSkipped(b []byte, x savedIndex, size int64) ([]SkippedRange, bool) {
	if len(b) < 8 {
		return nil, false
	}
	m := binary.LittleEndian.Uint64(b)
	b = b[8:]
	if m == 0 || uint64(len(b)) != 32*m {
		return nil, false
	}
	out := make([]SkippedRange, 0, m)
	prevTo := x.first - 1
	for i := uint64(0); i < m; i++ {
		r := SkippedRange{
			Offset: int64(binary.LittleEndian.Uint64(b[32*i:])),
			Length: int64(binary.LittleEndian.Uint64(b[32*i+8:])),
			From:   Seq(binary.LittleEndian.Uint64(b[32*i+16:])),
			To:     Seq(binary.LittleEndian.Uint64(b[32*i+24:])),
		}
		if r.Offset < segHeaderSize || r.Length < 0 || r.Offset+r.Length > size || r.From <= prevTo || r.From > r.To+1 || r.To > x.last {
			return nil, false
		}
		prevTo = max(prevTo, r.To)
		out = append(out, r)
	}
	return out, true
}

func idxPath(dir string, first Seq) string {
	return filepath.Join(dir, fmt.Sprintf("%020d", uint64(first))+idxExt)
}

// writeFileAtomic writes data to dir/name through a temporary file and a
// rename; with sync it fsyncs the file before the rename and the directory
// after it.
func writeFileAtomic(fsys FS, dir, name string, data []byte, sync bool) error {
	path := filepath.Join(dir, name)
	tmp := path + tmpExt
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err == nil && sync {
		err = fsys.SyncDir(dir)
	}
	if err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// readFile reads a whole small file; a missing file gives (nil, nil).
func readFile(fsys FS, path string) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

// cleanMarker is the decoded CLEAN file.
type cleanMarker struct {
	segFirst, last Seq
	end            int64
}

func encodeClean(c cleanMarker) []byte {
	b := make([]byte, 32, 36)
	copy(b, cleanMagic)
	binary.LittleEndian.PutUint64(b[8:], uint64(c.segFirst))
	binary.LittleEndian.PutUint64(b[16:], uint64(c.last))
	binary.LittleEndian.PutUint64(b[24:], uint64(c.end))
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

func decodeClean(b []byte) (cleanMarker, bool) {
	if len(b) != 36 || string(b[:8]) != cleanMagic || crc32.ChecksumIEEE(b[:32]) != binary.LittleEndian.Uint32(b[32:]) {
		return cleanMarker{}, false
	}
	return cleanMarker{
		segFirst: Seq(binary.LittleEndian.Uint64(b[8:])),
		last:     Seq(binary.LittleEndian.Uint64(b[16:])),
		end:      int64(binary.LittleEndian.Uint64(b[24:])),
	}, true
}
