package broker

// seqHeap is a min-heap of offsets (the redelivery queue: lowest first).
// Entries are validated lazily by the owner when popped.
type seqHeap []Seq

func (h *seqHeap) push(s Seq) {
	*h = append(*h, s)
	a := *h
	i := len(a) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if a[parent] <= a[i] {
			break
		}
		a[parent], a[i] = a[i], a[parent]
		i = parent
	}
}

func (h *seqHeap) peek() (Seq, bool) {
	if len(*h) == 0 {
		return 0, false
	}
	return (*h)[0], true
}

func (h *seqHeap) pop() Seq {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && a[l] < a[m] {
			m = l
		}
		if r < n && a[r] < a[m] {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

// timerEntry is a point in time at which an offset's lease ends or its nack
// delay is over. It is stale (ignored) unless the offset still has the same
// attempt count and deadline.
type timerEntry struct {
	at      int64 // unix nanoseconds
	seq     Seq
	attempt uint32
}

// timerHeap is a min-heap of timer entries by time.
type timerHeap []timerEntry

func (h *timerHeap) push(e timerEntry) {
	*h = append(*h, e)
	a := *h
	i := len(a) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if a[parent].at <= a[i].at {
			break
		}
		a[parent], a[i] = a[i], a[parent]
		i = parent
	}
}

func (h *timerHeap) peek() (timerEntry, bool) {
	if len(*h) == 0 {
		return timerEntry{}, false
	}
	return (*h)[0], true
}

func (h *timerHeap) pop() timerEntry {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && a[l].at < a[m].at {
			m = l
		}
		if r < n && a[r].at < a[m].at {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

// init restores the heap property of an arbitrary slice.
func (h seqHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		for j := i; ; {
			l, r, m := 2*j+1, 2*j+2, j
			if l < len(h) && h[l] < h[m] {
				m = l
			}
			if r < len(h) && h[r] < h[m] {
				m = r
			}
			if m == j {
				break
			}
			h[j], h[m] = h[m], h[j]
			j = m
		}
	}
}

// init restores the heap property of an arbitrary slice.
func (h timerHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		for j := i; ; {
			l, r, m := 2*j+1, 2*j+2, j
			if l < len(h) && h[l].at < h[m].at {
				m = l
			}
			if r < len(h) && h[r].at < h[m].at {
				m = r
			}
			if m == j {
				break
			}
			h[j], h[m] = h[m], h[j]
			j = m
		}
	}
}
