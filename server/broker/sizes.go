package broker

// sizeLedger keeps the byte size of a partition's retained messages: each
// message's size (4 bytes of memory per retained message) plus a running
// total per chunk of ledgerChunk offsets, so the bytes from any offset to
// the end take O(ledgerChunk). Owned by the partition actor.
type sizeLedger struct {
	origin Seq      // first offset of cum[0]'s chunk
	cum    []uint64 // cum[i]: bytes of chunks 0..i plus base
	base   uint64   // bytes of the chunks trimmed off the front
	last   Seq      // last offset added (0: none)
	lo     Seq      // first offset added (its chunk may start below it)
	size   []uint32 // size[s-origin]: bytes of offset s (0 below lo)
}

const ledgerChunk = 64

// add records n bytes for seq, which must follow the last offset added (the
// first add may start anywhere).
func (l *sizeLedger) add(seq Seq, n int64) {
	if l.last == 0 || len(l.cum) == 0 {
		l.origin = seq - (seq-1)%ledgerChunk // chunks start at 1, 65, 129, ...
		l.cum = l.cum[:0]
		l.size = l.size[:0]
		l.lo = seq
	}
	for Seq(len(l.size)) <= seq-l.origin {
		l.size = append(l.size, 0)
	}
	l.size[seq-l.origin] = uint32(min(n, 1<<32-1))
	i := int((seq - l.origin) / ledgerChunk)
	for len(l.cum) <= i {
		prev := l.base
		if len(l.cum) > 0 {
			prev = l.cum[len(l.cum)-1]
		}
		l.cum = append(l.cum, prev)
	}
	l.cum[i] += uint64(n)
	l.last = seq
}

// addRun records seqs from..to at per bytes each (the sizes of records
// stored before Open are known only on average).
func (l *sizeLedger) addRun(from, to Seq, per int64) {
	for s := from; s <= to; {
		end := min(s-(s-1)%ledgerChunk+ledgerChunk-1, to)
		for ; s <= end; s++ {
			l.add(s, per)
		}
	}
}

// total returns the bytes recorded from the start of the retained chunks.
func (l *sizeLedger) total() uint64 {
	if len(l.cum) == 0 {
		return l.base
	}
	return l.cum[len(l.cum)-1]
}

// from returns the bytes of the offsets from a to the last one added.
func (l *sizeLedger) from(a Seq) int64 {
	if len(l.cum) == 0 || a > l.last {
		return 0
	}
	if a <= max(l.origin, l.lo) {
		return int64(l.total() - l.base)
	}
	i := int((a - l.origin) / ledgerChunk)
	before := l.base
	if i > 0 {
		before = l.cum[i-1]
	}
	var part uint64
	for s := l.origin + Seq(i)*ledgerChunk; s < a; s++ {
		part += uint64(l.size[s-l.origin])
	}
	return int64(l.total() - before - part)
}

// cutFor returns the lowest offset in [first, last+1] from which at most
// maxBytes remain.
func (l *sizeLedger) cutFor(first Seq, maxBytes int64) Seq {
	lo, hi := first, l.last+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if l.from(mid) <= maxBytes {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// trim forgets the chunks wholly below first.
func (l *sizeLedger) trim(first Seq) {
	if len(l.cum) == 0 || first <= l.origin {
		return
	}
	k := int((first - l.origin) / ledgerChunk)
	if k == 0 {
		return
	}
	if k >= len(l.cum) {
		k = len(l.cum) - 1 // keep the chunk that holds last
	}
	l.base = l.cum[k-1]
	l.cum = l.cum[:copy(l.cum, l.cum[k:])]
	l.size = l.size[:copy(l.size, l.size[k*ledgerChunk:])]
	l.origin += Seq(k) * ledgerChunk
}
