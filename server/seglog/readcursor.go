package seglog

import (
	"sync"

	"golang.org/x/sys/unix"
)

// Dropping what readers have read from the process's resident set.
//
// Reads go through the segments' memory maps, so every page a reader
// touches stays in the process's RSS (as file pages the kernel may
// reclaim) until it is unmapped: a consumer draining a long backlog would
// keep all it read resident until retention dropped the segments. So Read
// drops, with madvise MADV_DONTNEED on the shared file mapping (the data
// stays in the page cache; a later read faults it back in), the pages that
// readers have moved past: within a segment whole dropChunks, keeping the
// chunk being read and the one before it; when a reader moves on to a later
// segment, the whole segment it left (sealed and uncompressed, and no other
// reader in it), which by then has little mapped.
//
// In chunks because MADV_DONTNEED costs in proportion to the pages it
// unmaps and runs on the reader's path (the broker's partition actor):
// dropping a whole read 64 MiB segment at once took 1-6 ms on a 2-vCPU VM,
// a stall of every publish and delivery of the partition at every roll.
//
// Readers are told apart by where they read: a few cursors, each a segment
// and how far into it pages were dropped. A read at or past a cursor in the
// same segment moves that cursor; a read in a later segment moves the
// cursor of the newest segment before it; any other read (a new reader, or
// one behind all cursors: a slower group) takes a cursor of its own, the
// least recently used one when all are taken. A wrong guess only costs
// page faults: dropping mapped file pages never loses data.

// maxCursors bounds the readers told apart (consumer groups reading one
// partition at different places); more share cursors, at the cost of
// faulting pages in again.
const maxCursors = 4

// dropChunk is the step in which pages are dropped behind a reader (a
// multiple of the page size; segments are mapped page-aligned).
const dropChunk = 1 << 20

type readCursor struct {
	seg     *segment
	dropped int64  // pages of seg below this offset were dropped
	used    uint64 // cursorSet.tick at its last move (least recently used goes first)
}

// cursorSet is where the readers are: it decides what they moved past; the
// Log drops it. A leaf lock: its mutex holds no other.
type cursorSet struct {
	mu   sync.Mutex
	cs   [maxCursors]readCursor
	tick uint64
}

// move notes a read at offset off of segment s and returns what the
// reader has moved past: the pages [from, to) of s (to <= from: none),
// and a segment left behind that no reader is in any more (nil: none).
func (c *cursorSet) move(s *segment, off int64) (from, to int64, left *segment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tick++
	cs := &c.cs
	// The same reader moving on in s: the cursor in s furthest along but
	// not past off.
	at := -1
	for i := range cs {
		if r := &cs[i]; r.seg == s && r.dropped <= off && (at < 0 || r.dropped > cs[at].dropped) {
			at = i
		}
	}
	if at >= 0 {
		r := &cs[at]
		r.used = c.tick
		from, to = r.dropped, off&^(dropChunk-1)-dropChunk
		if to <= from {
			return 0, 0, nil
		}
		r.dropped = to
		return from, to, nil
	}
	// A reader that left an earlier segment for s: the cursor in the newest
	// segment before s. Otherwise a cursor of its own.
	at = -1
	for i := range cs {
		if r := &cs[i]; r.seg != nil && r.seg.first < s.first && (at < 0 || r.seg.first > cs[at].seg.first) {
			at = i
		}
	}
	if at >= 0 {
		left = cs[at].seg
	} else {
		at = 0
		for i := range cs {
			if cs[i].seg == nil {
				at = i
				break
			}
			if cs[i].used < cs[at].used {
				at = i
			}
		}
	}
	cs[at] = readCursor{seg: s, dropped: off &^ (dropChunk - 1), used: c.tick}
	for i := 0; left != nil && i < len(cs); i++ {
		if cs[i].seg == left {
			left = nil // another reader is still in it
		}
	}
	return 0, 0, left
}

// readForward notes that a Read went to offset off of segment s and drops
// what the reader has moved past. Called with mu read-locked: segments in
// l.segs stay mapped meanwhile.
func (l *Log) readForward(s *segment, off int64) {
	if s.codec != CompressionNone {
		return
	}
	from, to, left := l.fwd.move(s, off)
	if to > from {
		_ = unix.Madvise(s.data[from:to], unix.MADV_DONTNEED) // advice only
	}
	if left != nil && l.segs.holdsSealed(left) && left.codec == CompressionNone && len(left.data) > 0 {
		_ = unix.Madvise(left.data, unix.MADV_DONTNEED) // advice only
	}
}
