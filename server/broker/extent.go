package broker

// extent (actor) is what a partition's data log holds: its first and last
// offsets, the purge floor below which offsets are gone for readers, the
// bytes of each offset (sizeLedger), and the append counters.
type extent struct {
	first, last Seq
	purgeFloor  Seq // offsets below it were purged (Topic.Purge)
	sizes       sizeLedger
	totalBytes  int64  // payload bytes appended (or sampled) since open, for the average
	totalMsgs   int64  // the records totalBytes counts
	published   uint64 // messages appended since open (counter)
}

// readFrom is the first offset readers can still read.
func (x *extent) readFrom() Seq { return max(x.first, x.purgeFloor) }

// appended takes the record seq of n payload bytes, just appended (the
// caller moves last).
func (x *extent) appended(seq Seq, n int64) {
	x.sampled(n)
	x.sizes.add(seq, n)
	x.published++
}

// sampled counts a record of n bytes toward the average size (Open samples
// the records stored before it; see sampleSizes).
func (x *extent) sampled(n int64) {
	x.totalBytes += n
	x.totalMsgs++
}

// avgSize is the average record size counted so far (0: none).
func (x *extent) avgSize() int64 {
	if x.totalMsgs == 0 {
		return 0
	}
	return x.totalBytes / x.totalMsgs
}

// purgeTo raises the purge floor to to; it reports whether it rose.
func (x *extent) purgeTo(to Seq) bool {
	if to <= x.purgeFloor {
		return false
	}
	x.purgeFloor = to
	return true
}
