package broker

import (
	"github.com/fibrilmq/fibril/server/seglog"
)

// Names of a partition's two logs inside its directory.
const (
	dataLogName   = "data"
	eventsLogName = "events"
)

// openStore opens one of a partition's logs: through Options.OpenStore when
// set (which then decides about compression too), else as a file-backed
// seglog sized for what it holds. Data logs compress sealed segments as the
// topic's Compression says; event logs never do (they are replayed on every
// open and truncated soon after).
func (t *Topic) openStore(dir string, events bool, policy seglog.Policy, quick bool) (seglog.Store, error) {
	o := &t.b.opts
	if o.OpenStore != nil {
		return o.OpenStore(dir, policy)
	}
	// A compressed segment's old map stays until the partition says no
	// delivery borrows it (partition.releaseSwapped).
	// Verify: every stored record is checked before the partition
	// serves, so damage done while the broker was stopped refuses the
	// start (naming file, offset and sequence) instead of being met by a
	// consumer.
	so := seglog.Options{Policy: policy, SegmentSize: t.dataSegmentSize(), Compression: seglogCompression(t.cfg.Compression),
		HoldSwapped: t.compressed(), Verify: true, QuickVerify: quick}
	if events {
		so.SegmentSize, so.Compression, so.HoldSwapped = o.EventSegmentSize, seglog.CompressionNone, false
	}
	l, err := seglog.Open(dir, so)
	if err != nil {
		return nil, err
	}
	if rec := l.Recovery(); rec.TruncatedBytes > 0 {
		// Only records never confirmed are cut (anything the log had made
		// durable that is damaged fails the Open instead), but an operator
		// should see that a crash tore a write.
		t.b.logf("topic %s: %s: recovery cut a torn tail after the last intact record: %d bytes at offset %d of %s",
			t.name, dir, rec.TruncatedBytes, rec.TruncatedAt, rec.TruncatedPath)
	}
	return l, nil
}

// dataSegmentSize is the same for every topic, dead-letter topics included: a
// dead letter is its original plus a few header lines, so it must fit wherever
// the original did (the log preallocates progressively, so a mostly empty
// dead-letter topic costs little disk).
func (t *Topic) dataSegmentSize() int64 { return t.b.opts.SegmentSize }

// maxBody is the largest header+payload a record of this topic can hold.
func (t *Topic) maxBody() int64 { return t.dataSegmentSize() - recordSlack }

// compressed reports whether the topic's sealed data segments are
// compressed (and its data logs hold replaced maps: swaprelease.go).
func (t *Topic) compressed() bool {
	return seglogCompression(t.cfg.Compression) != seglog.CompressionNone
}
