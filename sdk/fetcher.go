package fibril

// Pull consuming with prefetch (SPEC.md "POLL"): a Fetcher keeps POLLs on
// the wire while the application handles the batch it got, so the next
// batch is on its way instead of costing a round trip (and, behind a
// pipelined ACK, the wait for that ACK's commit).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// FetcherOption configures NewFetcher.
type FetcherOption func(*fetcherOpts)

type fetcherOpts struct {
	prefetch int
}

// WithPrefetch sets how many POLLs a Fetcher keeps outstanding while the
// application handles the batch Next returned (default 2, at most 16; 0
// makes every Next one round trip, like Fetch). Two is what a consumer that
// acks each batch with AckAllAsync needs: an ACK is answered after the
// server commits it, and answers come in command order, so a POLL written
// after an ACK waits for that commit; with two out, the POLL Next waits for
// was written before the previous batch's ACK.
//
// Lease safety: the deliveries of a prefetched batch are leased from the
// moment the server answers its POLL, so their lease time runs while they
// wait in the client: up to n batches of max messages may be waiting. Keep
// the time to handle n batches well within the group's lease_ms, or the
// server redelivers them elsewhere and their acks fail with ErrStaleHandle.
func WithPrefetch(n int) FetcherOption { return func(o *fetcherOpts) { o.prefetch = n } }

// maxPrefetch bounds WithPrefetch: more POLLs in flight only hold more
// leases, they do not make the server faster.
const maxPrefetch = 16

// Fetcher pulls batches from one durable group with POLLs kept in flight
// (WithPrefetch). Make one with NewFetcher, call Next for each batch and
// Close it when done; Close hands prefetched deliveries back to the server.
// Safe for concurrent use; batches are returned in the order the server
// answered.
type Fetcher struct {
	c        *Conn
	topic    string
	group    string
	max      int
	wait     time.Duration
	prefetch int
	poll     []byte // the POLL command, the same for every request

	mu     sync.Mutex
	polls  []*request // POLLs on the wire (or queued for a reconnect), oldest first
	closed bool
	hint   int // the size of the last batch: room to make in the next ones
}

// NewFetcher returns a Fetcher of the durable group on topic whose POLLs ask
// for up to max messages and wait up to wait for the first one (as Fetch
// does). It sends nothing until the first Next. Because answers come in
// command order, a POLL waiting on an idle topic holds back the answers to
// later commands on the same Conn (acks included) for up to wait: a
// blocking Ack or AckAll waits that long, and an AckFuture completes only
// after that POLL's answer. Use AckAllAsync and check its futures later,
// and a Conn of its own for latency-sensitive work.
func (c *Conn) NewFetcher(topic, group string, max int, wait time.Duration, opts ...FetcherOption) (*Fetcher, error) {
	if err := checkSubject(topic); err != nil {
		return nil, err
	}
	if err := checkSubject(group); err != nil {
		return nil, fmt.Errorf("group: %w", err)
	}
	o := fetcherOpts{prefetch: 2}
	for _, op := range opts {
		op(&o)
	}
	if max < 1 || wait < 0 || o.prefetch < 0 || o.prefetch > maxPrefetch {
		return nil, fmt.Errorf("%w: NewFetcher needs max >= 1, wait >= 0 and 0 <= prefetch <= %d", ErrInvalidArgument, maxPrefetch)
	}
	return &Fetcher{
		c: c, topic: topic, group: group, max: max, wait: wait, prefetch: o.prefetch,
		poll: protocol.AppendPoll(nil, topic, group, max, wait.Milliseconds()),
	}, nil
}

// Next returns the next batch: up to max verified messages, possibly none
// when wait passed without one. It blocks until that batch's POLL is
// answered or ctx is done; before returning a batch it sends POLLs so that
// the prefetch count is on the wire again. If ctx ends first, Next returns
// ctx.Err() and the batch stays for the next call (nothing is lost). As with
// Fetch, deliveries that failed their CRC check are not returned (they were
// nacked); the error then wraps ErrCorruptDelivery next to the good
// messages. After Close, Next returns ErrClosed.
func (f *Fetcher) Next(ctx context.Context) ([]*Msg, error) {
	if f.c.cfg.reqTimeout > 0 { // as every request: see WithRequestTimeout
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, f.c.cfg.reqTimeout)
			defer cancel()
		}
	}
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			return nil, ErrClosed
		}
		if len(f.polls) == 0 {
			if err := f.refillLocked(1); err != nil {
				f.mu.Unlock()
				return nil, err
			}
		}
		r := f.polls[0]
		f.mu.Unlock()
		select {
		case <-r.done.wait():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		f.mu.Lock()
		if f.closed || len(f.polls) == 0 || f.polls[0] != r {
			f.mu.Unlock()
			continue // Close or another Next took it
		}
		f.polls[0] = nil
		f.polls = f.polls[1:]
		f.hint = len(r.msgs) + len(r.corrupt)
		// the next batches are on their way while the caller handles this
		// one; a send failure shows on the next call
		_ = f.refillLocked(f.prefetch)
		f.mu.Unlock()
		if r.err != nil {
			return nil, fmt.Errorf("fibril: POLL %s %s: %w", f.topic, f.group, r.err)
		}
		return f.c.pollResult(r)
	}
}

// refillLocked sends POLLs until n are outstanding. Caller holds f.mu.
func (f *Fetcher) refillLocked(n int) error {
	var rs []*request
	for len(f.polls)+len(rs) < n {
		rs = append(rs, newPoll(f.poll, min(max(f.hint, 16), f.max), f.wait))
	}
	if len(rs) == 0 {
		return nil
	}
	sent, err := f.c.sendAll(rs)
	f.polls = append(f.polls, rs[:sent]...)
	if err != nil {
		return fmt.Errorf("fibril: POLL %s %s: %w", f.topic, f.group, err)
	}
	return nil
}

// Close stops the Fetcher and hands the deliveries of its outstanding POLLs
// back to the server (nacked, so they are ready at once), including those of
// POLLs still on the wire when they arrive. Batches already returned by Next
// stay the caller's to settle. It does not block; a second Close returns nil.
func (f *Fetcher) Close() error {
	f.mu.Lock()
	polls := f.polls
	f.polls, f.closed = nil, true
	f.mu.Unlock()
	for _, r := range polls {
		if r.state.CompareAndSwap(0, 2) {
			continue // finish releases its deliveries on arrival
		}
		<-r.done.wait()
		for _, m := range r.msgs {
			f.c.releaseAsync(m)
		}
	}
	return nil
}

// newPoll returns a POLL request, about to be sent, that waits up to wait
// and whose batch has room for n deliveries (up to a bound; a larger batch
// grows as needed).
func newPoll(frame []byte, n int, wait time.Duration) *request {
	r := newRequest(reqPoll, frame)
	r.msgs = make([]*Msg, 0, min(n, 1024))
	r.waitUntil = time.Now().Add(wait)
	return r
}

// pollResult returns the messages of an answered POLL and, when some
// deliveries were corrupt, an error that joins their errors.
func (c *Conn) pollResult(r *request) ([]*Msg, error) {
	if n, perr := protocol.ParsePollDone([]byte(r.arg)); perr != nil || n != len(r.msgs)+len(r.corrupt) {
		c.cfg.logger.Warn("fibril: POLL count mismatch", "said", r.arg, "got", len(r.msgs)+len(r.corrupt))
	}
	return r.msgs, errors.Join(r.corrupt...)
}
