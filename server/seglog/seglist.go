package seglog

import "sort"

// segList is the log's segments, ascending by first sequence number; the
// last one is the active one. It lives under Log.mu: changed with it held
// for writing, read with it read-held.
type segList []*segment

// active returns the last segment (nil only while opening). The writer
// uses Log.w.act instead, without mu.
func (ss segList) active() *segment {
	if len(ss) == 0 {
		return nil
	}
	return ss[len(ss)-1]
}

// sealed returns every segment but the active one.
func (ss segList) sealed() segList { return ss[:max(len(ss)-1, 0)] }

// find returns the index of the segment that would hold seq: the last
// whose first sequence number is at or below seq (-1: seq precedes all).
func (ss segList) find(seq Seq) int {
	return sort.Search(len(ss), func(i int) bool { return ss[i].first > seq }) - 1
}

// holdsSealed reports whether s is still one of the segments and not the
// active one.
func (ss segList) holdsSealed(s *segment) bool {
	n := len(ss)
	i := sort.Search(n, func(i int) bool { return ss[i].first >= s.first })
	return i < n-1 && ss[i] == s
}

// replace puts ns where old was (the compressor's swap).
func (ss segList) replace(old, ns *segment) {
	for i, x := range ss {
		if x == old {
			ss[i] = ns
		}
	}
}
