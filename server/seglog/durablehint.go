package seglog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"sync"
)

// The durable-point hint.
//
// After every fsync that raises the durable point, the log writes that
// point into its LOCK file (16 bytes at offset 0: magic, sequence number,
// CRC-32), with pwrite and no fsync of its own: the kernel writes it back
// within seconds, or the next Open finds an older value, or none (a torn
// or missing hint reads as 0). It is written only after the fsync it
// describes returned, so whatever value Open reads, every record up to it
// was durable. Recovery uses it with the hints in record headers (record.go)
// to tell damage from a torn write in the last segment: a damaged or
// missing record at or below it was confirmed, so that is corruption
// (Open fails) rather than a tail to cut.
//
// Why the LOCK file: it is open for the whole life of the log anyway, so
// the hint costs one pwrite per fsync and no descriptor.

const (
	hintMagic = "FDH1"
	hintSize  = 16
)

// durableHint is the log's writer of the hint.
type durableHint struct {
	mu   sync.Mutex
	f    File // the LOCK file; nil once released
	last Seq  // highest value written
}

func encodeDurableHint(seq Seq) []byte {
	b := make([]byte, hintSize)
	copy(b, hintMagic)
	binary.LittleEndian.PutUint64(b[4:], uint64(seq))
	binary.LittleEndian.PutUint32(b[12:], crc32.ChecksumIEEE(b[:12]))
	return b
}

// decodeDurableHint returns the hint in b, 0 when there is none or it is
// damaged.
func decodeDurableHint(b []byte) Seq {
	if len(b) < hintSize || string(b[:4]) != hintMagic || crc32.ChecksumIEEE(b[:12]) != binary.LittleEndian.Uint32(b[12:]) {
		return 0
	}
	return Seq(binary.LittleEndian.Uint64(b[4:]))
}

// readHint returns the hint stored in f (the LOCK file), 0 if none.
func readHint(f File) Seq {
	b := make([]byte, hintSize)
	if n, _ := f.ReadAt(b, 0); n < hintSize {
		return 0
	}
	return decodeDurableHint(b)
}

// note records that everything up to seq is durable. Best effort: a lost
// hint only weakens the next recovery's damage check back to what the
// record hints say.
func (h *durableHint) note(seq Seq) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil || seq <= h.last {
		return
	}
	if _, err := h.f.WriteAt(encodeDurableHint(seq), 0); err == nil {
		h.last = seq
	}
}

// release stops the writes (before the file is closed).
func (h *durableHint) release() {
	h.mu.Lock()
	h.f = nil
	h.mu.Unlock()
}

// The front hint.
//
// The LOCK file also keeps, at offset 16, where the log's front is: the
// first sequence number TruncateFront left, written and fsynced before it
// removes a segment (and, without fsync, when a log is created or first
// opened by a version that keeps it). Segment files missing from the front
// of the log then show: Open finds the first segment above the front hint,
// which TruncateFront never did, and refuses (with SkipCorrupt it records
// the range as lost, in the hint itself, so that every later Open lists it
// again as Recorded). A missing or damaged hint reads as "unknown" and
// checks nothing.
//
//	16 [4]byte "FFH1"
//	20 uint64  front: the first sequence number kept
//	28 uint64  lostFrom, 36 uint64 lostTo: a range recorded lost (lostTo < lostFrom: none)
//	44 uint32  CRC-32 (IEEE) of bytes 16..44
const (
	frontMagic = "FFH1"
	frontOff   = 16
	frontSize  = 32
)

// frontHint is the decoded front hint.
type frontHint struct {
	front            Seq // 0: unknown
	lostFrom, lostTo Seq
}

func encodeFrontHint(h frontHint) []byte {
	b := make([]byte, frontSize)
	copy(b, frontMagic)
	binary.LittleEndian.PutUint64(b[4:], uint64(h.front))
	binary.LittleEndian.PutUint64(b[12:], uint64(h.lostFrom))
	binary.LittleEndian.PutUint64(b[20:], uint64(h.lostTo))
	binary.LittleEndian.PutUint32(b[28:], crc32.ChecksumIEEE(b[:28]))
	return b
}

func readFrontHint(f File) frontHint {
	b := make([]byte, frontSize)
	if n, _ := f.ReadAt(b, frontOff); n < frontSize || string(b[:4]) != frontMagic || crc32.ChecksumIEEE(b[:28]) != binary.LittleEndian.Uint32(b[28:]) {
		return frontHint{}
	}
	return frontHint{
		front:    Seq(binary.LittleEndian.Uint64(b[4:])),
		lostFrom: Seq(binary.LittleEndian.Uint64(b[12:])),
		lostTo:   Seq(binary.LittleEndian.Uint64(b[20:])),
	}
}

// checkFront compares the first segment with the front hint (recover, the
// segments loaded): records missing from the front are corruption, or
// with SkipCorrupt a range recorded lost. A range recorded earlier is
// listed again.
func (l *Log) checkFront() error {
	h := l.lockf.front
	if h.lostFrom != 0 && h.lostTo >= h.lostFrom {
		l.rec.Skipped = append(l.rec.Skipped, SkippedRange{Path: filepath.Join(l.dir, segName(h.lostFrom)), From: h.lostFrom, To: h.lostTo, Recorded: true})
	}
	if len(l.segs) == 0 {
		return nil
	}
	first := l.segs[0].first
	if h.front == 0 {
		// Unknown (a log of an earlier version, a lost LOCK): from now on
		// it is known. Unsynced: lost, it is unknown again.
		return l.lockf.writeFront(frontHint{front: first}, false)
	}
	if first <= h.front {
		return nil
	}
	missing := filepath.Join(l.dir, segName(h.front))
	if !l.opts.SkipCorrupt {
		return &CorruptError{Path: missing, Seq: h.front,
			Reason: fmt.Sprintf("records %d..%d are missing from the front of the log (it starts at %s, but only retention removes segments and it had kept every record from %d): the segment file(s) were deleted",
				h.front, first-1, filepath.Base(l.segs[0].path), h.front)}
	}
	l.rec.Skipped = append(l.rec.Skipped, SkippedRange{Path: missing, From: h.front, To: first - 1})
	return l.lockf.writeFront(frontHint{front: first, lostFrom: h.front, lostTo: first - 1}, true)
}

// The verified mark.
//
// With Options.Verify, an Open that checked every segment below the active
// one (or found them checked by an earlier such Open) records the active
// segment's first sequence number in the LOCK file at offset 48, without
// fsync: with Options.QuickVerify the next Open checks only the segments
// from there on. Lost or damaged, it reads as 0 and everything is checked.
//
//	48 [4]byte "FVH1", 52 uint64 first unchecked segment, 60 uint32 CRC-32 of 48..60
const (
	verifiedMagic = "FVH1"
	verifiedOff   = frontOff + frontSize
	verifiedSize  = 16
)

func readVerifiedMark(f File) Seq {
	b := make([]byte, verifiedSize)
	if n, _ := f.ReadAt(b, verifiedOff); n < verifiedSize || string(b[:4]) != verifiedMagic || crc32.ChecksumIEEE(b[:12]) != binary.LittleEndian.Uint32(b[12:]) {
		return 0
	}
	return Seq(binary.LittleEndian.Uint64(b[4:]))
}

func encodeVerifiedMark(first Seq) []byte {
	b := make([]byte, verifiedSize)
	copy(b, verifiedMagic)
	binary.LittleEndian.PutUint64(b[4:], uint64(first))
	binary.LittleEndian.PutUint32(b[12:], crc32.ChecksumIEEE(b[:12]))
	return b
}
