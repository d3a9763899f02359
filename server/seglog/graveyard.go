package seglog

// graveyard holds the segments that left the log but stay mapped, because
// records read from them are still borrowed: those TruncateFront dropped,
// until the next TruncateFront, and the plain segments the compressor
// replaced, until the next TruncateFront too or, with Options.HoldSwapped,
// until ReleaseSwapped passes their replacement's number. It also counts
// the replacements (SwapCount). Under Log.mu; it decides, the releaser
// (release.go) unmaps.
type graveyard struct {
	segs  []*segment
	swaps uint64 // segments the compressor replaced so far
	safe  uint64 // ReleaseSwapped's highest argument
	hold  bool   // Options.HoldSwapped
}

// swap numbers the next replacement.
func (g *graveyard) swap() uint64 {
	g.swaps++
	return g.swaps
}

// bury adds segments dropped by TruncateFront.
func (g *graveyard) bury(ss ...*segment) { g.segs = append(g.segs, ss...) }

// buryReplaced adds s, the plain segment of replacement swapNo, and
// reports whether ReleaseSwapped passed it meanwhile (take(false) then
// frees it).
func (g *graveyard) buryReplaced(s *segment, swapNo uint64) bool {
	s.swapNo = swapNo
	g.segs = append(g.segs, s)
	return g.hold && swapNo <= g.safe
}

// pass notes that no reader borrows from the first upto replacements; it
// reports whether that is news.
func (g *graveyard) pass(upto uint64) bool {
	if upto <= g.safe {
		return false
	}
	g.safe = upto
	return true
}

// take removes and returns the segments whose maps may go now. all: a
// TruncateFront, which frees the truncated ones too, and the replaced ones
// unless HoldSwapped holds them.
func (g *graveyard) take(all bool) (dead []*segment) {
	var keep []*segment
	for _, s := range g.segs {
		var free bool
		if s.swapNo != 0 {
			free = s.swapNo <= g.safe || (all && !g.hold)
		} else {
			free = all
		}
		if free {
			dead = append(dead, s)
		} else {
			keep = append(keep, s)
		}
	}
	g.segs = keep
	return dead
}

// trash returns the trash files of the segments held (Close deletes them).
func (g *graveyard) trash() []string {
	var paths []string
	for _, s := range g.segs {
		if s.trash != "" {
			paths = append(paths, s.trash)
		}
	}
	return paths
}
