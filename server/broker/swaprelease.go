package broker

// Old maps of compressed segments. A compressed topic's data log replaces
// each sealed segment by its compressed file in the background; a delivery
// read from the plain map before that borrows it until its batch's
// completions run, after the next fsync, so the log (opened with
// seglog.Options.HoldSwapped) keeps the old map until the partition says
// no delivery can point into it.

// swapWatchRounds is how many rounds without appends (at least one
// RetentionInterval apart when idle) a compressed partition keeps looking
// for segments its log replaced meanwhile.
const swapWatchRounds = 10

// swapReleaser is the part of seglog.Store that releases the maps of
// segments a data log's compressor replaced (seglog.Options.HoldSwapped);
// every Store has it (one that holds none counts no replacements).
type swapReleaser interface {
	SwapCount() uint64
	ReleaseSwapped(upto uint64)
}

// swapGuard holds back the release of a compressed data log's replaced
// maps while deliveries may point into them (actor only).
type swapGuard struct {
	log      swapReleaser // nil: a plain topic, nothing to guard
	round    uint64       // log's SwapCount when the round began
	released uint64       // the last count released
	// watch: timer rounds left to look for replacements after the last
	// append (the compressor works in the background; an idle partition
	// would otherwise keep a replaced map and its file).
	watch int
}

// beginRound notes the log's SwapCount before anything of the round reads:
// a delivery read in the round borrows only maps replaced after it.
func (g *swapGuard) beginRound() {
	if g.log != nil {
		g.round = g.log.SwapCount()
	}
}

// watchAfter counts down the rounds left to look for replacements, and
// starts again after a round that appended.
func (g *swapGuard) watchAfter(appended bool) {
	if appended {
		g.watch = swapWatchRounds
	} else if g.watch > 0 {
		g.watch--
	}
}

// watching reports whether the actor must wake to release maps: the log
// has replaced some not released yet, or appends are recent.
func (g *swapGuard) watching() bool {
	return g.log != nil && (g.watch > 0 || g.log.SwapCount() > g.released)
}

// release lets the log unmap every replaced map it holds, or only those
// replaced before count swap when borrowed (a delivery read when the log
// had made swap replacements may point into any later one). A count is
// released once.
func (g *swapGuard) release(swap uint64, borrowed bool) {
	safe := g.log.SwapCount()
	if borrowed {
		safe = min(safe, swap)
	}
	if safe > g.released {
		g.released = safe
		g.log.ReleaseSwapped(safe)
	}
}

// releaseSwapped lets the data log of a compressed topic unmap the old
// maps of replaced segments that no pending delivery can point into: a
// delivery read when the log had made n replacements borrows only maps of
// later ones, so the lowest count noted by a batch with deliveries, or by a
// collecting poll, bounds what may go.
func (p *partition) releaseSwapped() {
	if p.swaps.log == nil {
		return
	}
	_, swap, ok := p.commit.borrowed()
	p.swaps.release(swap, ok)
}
