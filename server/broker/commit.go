package broker

import (
	"cmp"

	"github.com/fibrilmq/fibril/server/stagetime"
)

// commitPipeline (actor) is the partition's commit: each round's
// completions (publish confirms, settle answers, deliveries and other work
// that must wait for durability) and, under durability group or sync, the
// batches of them waiting for their records to be durable.
//
// pipelined: the partition owns fsync (durability group and sync,
// syncer.go): the logs are written without fsync and each round's
// completions wait in pending until their records are durable; under
// group the lanes fsync while the actor goes on, under sync the actor
// fsyncs at the end of the round. With "none" rounds complete at once.
type commitPipeline struct {
	pipelined bool

	// The round's completions, sealed into a batch by seal.
	pubs     []pubResult
	sets     []setResult
	after    []func()
	roundErr error // append error of this round
	minDeliv Seq   // lowest offset delivered this round (0: none)

	// err: the error of the batch whose completions run now; dataErr: its
	// data fsync failed, so deliveries in it are not handed out.
	err, dataErr error

	// durData is the highest data offset known durable. Records up to
	// the partition's last (written) are leased at once, but a delivery
	// is answered only with its batch, once the data and the delivery's
	// event are durable.
	durData   Seq
	durEvents Seq // highest event record known durable
	safeLow   Seq // lowest group frontier that is durable (retention)
	pending   []syncBatch
	// collecting: polls served while a commit's fsync was in flight; they
	// take what arrives until the actor learns that fsync ended (see collect).
	collecting []*pollWaiter

	// stages records the stages of sampled publishes (nil: off);
	// lastData is the span of the last data fsync the actor learnt of.
	stages   *stagetime.Recorder
	lastData fsyncSpan
}

// fsyncSpan is when an fsync began and ended, as stagetime.Now.
type fsyncSpan struct{ start, end int64 }

// pubResult is a publish completion waiting for its batch to be durable.
type pubResult struct {
	done PublishDone
	pos  Position
}

// setResult is a settle completion waiting for its round's events to be
// durable; err is the settle's own outcome (the commit's is added then).
type setResult struct {
	done func(error)
	err  error
}

// syncBatch is one round's completions, run once data up to data and
// events up to events are durable.
type syncBatch struct {
	data, events Seq
	side         uint64 // side copies up to this mark must be durable
	low          Seq    // lowest group frontier after the round
	minDeliv     Seq    // lowest offset delivered in the round (0: none)
	swap         uint64 // the data log's SwapCount before the round read anything
	sample       int64  // origin of the round's stage samples (roundInput.sample)
	appended     int64  // when the round's append returned (roundInput.appended)
	err          error  // the round's events (or their fsync) failed
	dataErr      error  // publishes are not confirmed, deliveries not handed out (fail)
	pubs         []pubResult
	sets         []setResult
	after        []func()
}

// fail makes every completion of b report err: a fsync of either log has
// failed, and the partition confirms nothing more.
func (b *syncBatch) fail(err error) { b.dataErr, b.err = err, cmp.Or(b.err, err) }

// beginRound forgets the last round's append error and deliveries.
func (c *commitPipeline) beginRound() { c.roundErr, c.minDeliv = nil, 0 }

// onCommit runs fn among the round's completions (dataErr tells it the
// outcome).
func (c *commitPipeline) onCommit(fn func()) { c.after = append(c.after, fn) }

// confirm queues a publish confirm for pos.
func (c *commitPipeline) confirm(done PublishDone, pos Position) {
	c.pubs = append(c.pubs, pubResult{done: done, pos: pos})
}

// answer queues a settle's answer; err is its own outcome.
func (c *commitPipeline) answer(done func(error), err error) {
	c.sets = append(c.sets, setResult{done: done, err: err}) // no closure: one settle per acked message
}

// delivered notes a delivery of seq: the round's batch borrows its record.
func (c *commitPipeline) delivered(seq Seq) { c.minDeliv = lowerSeq(c.minDeliv, seq) }

// idle reports whether the round has nothing to complete and, with group
// commit, wrote nothing not known durable (written false).
func (c *commitPipeline) idle(written bool) bool {
	return len(c.pubs) == 0 && len(c.sets) == 0 && len(c.after) == 0 && c.roundErr == nil && (!c.pipelined || !written)
}

// seal moves the round's completions into b, whose durable points the
// caller set.
func (c *commitPipeline) seal(b syncBatch) syncBatch {
	b.minDeliv, b.err, b.pubs, b.sets, b.after = c.minDeliv, c.roundErr, c.pubs, c.sets, c.after
	c.pubs, c.sets, c.after = nil, nil, nil
	return b
}

// complete runs a batch's completions; c.err and c.dataErr tell them the
// outcome. A batch without error makes its low the durable frontier.
func (c *commitPipeline) complete(b *syncBatch) {
	c.err, c.dataErr = b.err, b.dataErr
	if b.sample != 0 && c.lastData.start >= b.sample {
		// the data fsync the actor learnt of last is the one that made
		// the batch durable: none before it began after the batch's append
		start := max(c.lastData.start, b.appended)
		c.stages.At(stagetime.FsyncStart, b.sample, start)
		c.stages.At(stagetime.FsyncEnd, b.sample, max(c.lastData.end, start))
	}
	if len(b.pubs) > 0 && b.dataErr == nil {
		c.stages.Since(stagetime.Confirmed, b.sample)
	}
	for _, r := range b.pubs {
		// the data is durable even if the round's events failed
		if b.dataErr != nil {
			r.done.PublishDone(Position{}, b.dataErr)
		} else {
			r.done.PublishDone(r.pos, nil)
		}
	}
	for _, r := range b.sets {
		err := r.err
		if err == nil {
			err = c.err
		}
		r.done(err)
	}
	for _, fn := range b.after {
		fn()
	}
	c.err, c.dataErr = nil, nil
	if b.err == nil {
		c.safeLow = b.low
	}
	// keep the slices for the next rounds
	clear(b.pubs)
	clear(b.sets)
	clear(b.after)
	if c.pubs == nil {
		c.pubs = b.pubs[:0]
	}
	if c.sets == nil {
		c.sets = b.sets[:0]
	}
	if c.after == nil {
		c.after = b.after[:0]
	}
}

// drain completes the pending batches, oldest first, while durable says
// they may run; with fail set (an fsync failed) every one, failed.
func (c *commitPipeline) drain(fail error, durable func(*syncBatch) bool) {
	n := 0
	for n < len(c.pending) {
		b := &c.pending[n]
		if fail == nil && !durable(b) {
			break
		}
		if fail != nil {
			b.fail(fail)
		}
		c.complete(b)
		n++
	}
	c.pending = c.pending[:copy(c.pending, c.pending[n:])]
}

// borrowed returns what the deliveries not yet answered hold: the lowest
// offset they point into and the lowest SwapCount noted before they were
// read, over the pending batches with deliveries and the collecting polls
// (ok false: nothing is borrowed). Retention keeps the records from low on;
// releaseSwapped keeps the maps replaced after swap.
func (c *commitPipeline) borrowed() (low Seq, swap uint64, ok bool) {
	note := func(s Seq, n uint64) {
		if s == 0 {
			return
		}
		if !ok || n < swap {
			swap = n
		}
		low, ok = lowerSeq(low, s), true
	}
	for i := range c.pending {
		note(c.pending[i].minDeliv, c.pending[i].swap)
	}
	for _, w := range c.collecting {
		note(w.lowBorrowed, w.swap)
	}
	return low, swap, ok
}
