package seglog

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Verification of every stored record.
//
// Open trusts a sealed segment's index (and, after a clean Close, the last
// segment's) for where the records end, and scans only what it must; the
// records themselves are checked when they are read. With Options.Verify,
// Open also reads and checks every record of every segment (plain ones
// through their map, compressed ones decompressed), so damage done while
// the log was closed (a flipped bit, a zeroed block) makes Open fail with
// a *CorruptError naming the file, offset and sequence number instead of
// surfacing when a reader reaches it. VerifySegments does the same on an
// open log, one segment at a time, for a background scrub.

// verifyIndexed checks every record of s against the index x that Open is
// about to trust: each record intact (header and data), numbered in turn,
// ending exactly where the index says. Ranges the index records as skipped
// (an earlier SkipCorrupt) are stepped over. It returns "" when all is
// well, else what failed (Open then scans the segment, which names the
// damage or skips it).
func verifyIndexed(s *segment, x savedIndex) string {
	last, bad := verifyRecords(s.data[:x.end], s.first, x.skipped)
	if bad != nil {
		return bad.Error()
	}
	if last != x.last {
		return fmt.Sprintf("records end at %d, the index says %d", last, x.last)
	}
	return ""
}

// verifyRecords verifies every record of buf, a segment's bytes up to the
// end of its records whose first sequence number is first: each intact
// (header and data) and numbered in turn. Ranges skipped as damaged by an
// earlier Open are stepped over. It returns the last sequence number, or
// the first damage (Path left empty).
func verifyRecords(buf []byte, first Seq, skipped []SkippedRange) (Seq, *CorruptError) {
	off, seq := int64(segHeaderSize), first
	end := int64(len(buf))
	for off < end {
		if r, ok := skippedAt(skipped, off, seq); ok {
			off, seq = r.Offset+r.Length, r.To+1
			continue
		}
		h, st := checkRecord(buf, off)
		if st != recOK || h.seq != seq {
			reason := st.String()
			if st == recOK {
				reason = fmt.Sprintf("sequence %d where %d was expected", h.seq, seq)
			}
			return 0, &CorruptError{Offset: off, Seq: seq, Reason: reason}
		}
		if !h.side() {
			seq++
		}
		off += h.size()
	}
	if r, ok := skippedAt(skipped, off, seq); ok {
		seq = r.To + 1 // records lost from the end of the segment
	}
	return seq - 1, nil
}

// skippedAt returns the recorded skipped range starting at off (or, for a
// range of no bytes, holding seq).
func skippedAt(rs []SkippedRange, off int64, seq Seq) (SkippedRange, bool) {
	for _, r := range rs {
		if r.Offset == off && (r.Length > 0 || r.From == seq) {
			return r, true
		}
	}
	return SkippedRange{}, false
}

// dropPages tells the kernel the pages of s that verification touched are
// not needed in this process (they stay in the page cache).
func dropPages(s *segment) {
	if len(s.data) > 0 {
		_ = unix.Madvise(s.data, unix.MADV_DONTNEED) // advice only
	}
}

// VerifySegments reads and checks every record of the sealed segments
// whose first sequence number is at least from, in order, at most max
// segments (0: no limit), as Open does with Options.Verify; plain segments
// are read from the disk, not from the page cache, where the kernel
// allows. It returns where the next call should start (0: the last sealed
// segment was checked), the bytes checked, and the damage found as a
// *CorruptError (wrapping ErrCorrupt): it stops at the first damaged
// segment, and next says where to go on past it. It holds the log's read lock while
// it checks one segment: appends go on, a roll or TruncateFront waits for
// that segment. For a background scrub: call it again and again, pausing
// between calls.
func (l *Log) VerifySegments(from Seq, max int) (next Seq, bytes int64, err error) {
	for n := 0; max == 0 || n < max; n++ {
		s, b, done, verr := l.verifyNext(from)
		bytes += b
		if done {
			return 0, bytes, verr
		}
		if verr != nil {
			return s + 1, bytes, verr
		}
		from = s + 1
	}
	return from, bytes, nil
}

// verifyNext checks the first sealed segment whose first sequence number is
// at least from. done: there is none.
func (l *Log) verifyNext(from Seq) (first Seq, bytes int64, done bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed.Load() {
		return 0, 0, true, ErrClosed
	}
	var s *segment
	for _, x := range l.segs.sealed() {
		if x.first >= from {
			s = x
			break
		}
	}
	if s == nil {
		return 0, 0, true, nil
	}
	if s.codec != CompressionNone {
		v, err := l.decompress(s)
		if err != nil {
			return s.first, s.size, false, err
		}
		return s.first, s.size, false, checkAll(v, s)
	}
	defer unguard(&err, s.path, guard())
	// Sealed and synced: its pages are clean, and dropping them from the
	// page cache makes the check read what the disk holds.
	if f, oerr := os.Open(s.path); oerr == nil {
		dropCache(int(f.Fd())) // advice only
		f.Close()
	}
	err = checkAll(s, s)
	dropPages(s)
	return s.first, s.end, false, err
}

// checkAll verifies every record of the plain view v of s.
func checkAll(v, s *segment) error {
	if _, bad := verifyRecords(v.data[:v.end], v.first, s.skipped); bad != nil {
		bad.Path = s.path
		return bad
	}
	return nil
}

// verifyCompressed checks a compressed segment at Open (Options.Verify):
// it decompresses it (which checks its length and checksum) and every
// record in it.
func (l *Log) verifyCompressed(s *segment) error {
	v, err := l.decompress(s)
	if err != nil {
		return err
	}
	return checkAll(v, s)
}

// Uncompress replaces the compressed segment whose file is path (in the
// closed log dir) by its plain form: it decompresses and checks it, hands
// the compressed file to keep (which must move it away, say into a
// quarantine), then writes the plain segment (fsynced, then the
// directory). A repair uses it so that a range lost after a compressed
// segment can be recorded in a plain segment's index.
func Uncompress(dir, path string, keep func(path string) error) error {
	first, codec, ok := parseCompName(filepath.Base(path))
	if !ok || filepath.Dir(path) != dir {
		return fmt.Errorf("seglog: uncompress %s: not a compressed segment of %s", path, dir)
	}
	o, _ := Options{}.withDefaults()
	l := &Log{dir: dir, opts: o, fs: o.FS}
	s, err := l.openCompressed(first, codec)
	if err != nil {
		return err
	}
	v, err := l.decompress(s)
	if err != nil {
		return err
	}
	if err := keep(path); err != nil {
		return err
	}
	return writeFileAtomic(l.fs, dir, segName(first), v.data[:v.end], true)
}

// verifies reports whether Open checks the records of s (Options.Verify;
// with QuickVerify only the segments an earlier Open did not check).
func (l *Log) verifies(s *segment, isLast bool) bool {
	return l.opts.Verify && (!l.opts.QuickVerify || isLast || s.first >= l.lockf.verified)
}
