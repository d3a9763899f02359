package fibril

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// Handler processes one message. If it returns nil and has not settled the
// message, Consume acks it; if it returns an error, Consume nacks it (after
// the WithNackDelay delay). ctx is the Consume context. Consume's acks are
// pipelined and coalesced: each is queued as soon as its handler returns
// (AckAsync), the next message is handled while the server commits it, and
// the acks queued in a burst share one ACK line. An ack that fails reaches
// the error handler with its own error, and every ack is answered before
// Consume returns.
type Handler func(ctx context.Context, m *Msg) error

// ConsumeOption configures Consume and Messages.
type ConsumeOption func(*consumeOpts)

type consumeOpts struct {
	maxInFlight int
	concurrency int
	nackDelay   time.Duration
	onError     func(error)
	manual      bool
	autoExtend  time.Duration
}

// WithMaxInFlight bounds the unsettled deliveries the server pushes to this
// consumer (default: the server's max_inflight).
func WithMaxInFlight(n int) ConsumeOption { return func(o *consumeOpts) { o.maxInFlight = n } }

// WithConcurrency sets how many handler calls run at once (default 1).
func WithConcurrency(n int) ConsumeOption { return func(o *consumeOpts) { o.concurrency = n } }

// WithNackDelay sets the redelivery delay used when a handler returns an
// error (default 0: at once).
func WithNackDelay(d time.Duration) ConsumeOption { return func(o *consumeOpts) { o.nackDelay = d } }

// WithErrorHandler receives errors that do not stop consuming: corrupt
// deliveries, failed acks (default: logged).
func WithErrorHandler(f func(error)) ConsumeOption { return func(o *consumeOpts) { o.onError = f } }

// WithAutoExtend makes Consume send InProgress every d while a handler runs,
// so that jobs longer than the group's lease are not redelivered to someone
// else meanwhile. d should be well under the lease (a third, say).
func WithAutoExtend(d time.Duration) ConsumeOption { return func(o *consumeOpts) { o.autoExtend = d } }

// WithManualAck stops Consume from settling messages after the handler: the
// handler (or whoever it hands the message to) must settle each one.
func WithManualAck() ConsumeOption { return func(o *consumeOpts) { o.manual = true } }

func (c *Conn) consumeOptions(opts []ConsumeOption) (consumeOpts, error) {
	o := consumeOpts{concurrency: 1}
	for _, op := range opts {
		op(&o)
	}
	if o.maxInFlight < 0 || o.concurrency < 1 || o.nackDelay < 0 || o.autoExtend < 0 {
		return o, fmt.Errorf("%w: max in flight >= 0, concurrency >= 1, nack delay and auto extend >= 0", ErrInvalidArgument)
	}
	if o.onError == nil {
		log := c.cfg.logger
		o.onError = func(err error) { log.Warn("fibril: consumer error", "err", err) }
	}
	return o, nil
}

// Subscription is a push consumer of a durable group (SUB <topic> <group>
// <sid> <max-inflight>), read one message at a time with Next. The Conn's
// read loop queues deliveries into it without blocking; the server bounds
// them by max in flight. Safe for concurrent use.
type Subscription struct {
	conn         *Conn
	sid          uint64
	topic, group string
	maxInFlight  int

	mu     sync.Mutex
	queue  []item
	err    error // set when the subscription ends
	notify chan struct{}
}

type item struct {
	m   *Msg
	err error
}

func (s *Subscription) subFrame() []byte {
	return protocol.AppendSub(nil, s.topic, s.group, strconv.FormatUint(s.sid, 10), s.maxInFlight)
}

func (s *Subscription) push(m *Msg, err error) {
	s.mu.Lock()
	s.queue = append(s.queue, item{m, err})
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *Subscription) close(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// next blocks for the next item; ok is false once the subscription ended or
// ctx is done (err says which).
func (s *Subscription) next(ctx context.Context) (item, bool, error) {
	it, ok, _, err := s.nextOr(ctx, nil)
	return it, ok, err
}

// nextOr is next that also returns (with woke set, ok false and no error)
// when wake is closed first; a nil wake never fires.
//
// A done ctx wins over queued deliveries: a consumer cancelled with a
// backlog stops after the message it is handling (the backlog is handed
// back by unsubscribe), not after the backlog.
func (s *Subscription) nextOr(ctx context.Context, wake <-chan struct{}) (it item, ok, woke bool, err error) {
	for {
		if err := ctx.Err(); err != nil {
			return item{}, false, false, err
		}
		s.mu.Lock()
		if len(s.queue) > 0 {
			it := s.queue[0]
			s.queue[0] = item{}
			s.queue = s.queue[1:]
			more := len(s.queue) > 0
			s.mu.Unlock()
			if more { // let a sibling worker wake too
				select {
				case s.notify <- struct{}{}:
				default:
				}
			}
			return it, true, false, nil
		}
		err := s.err
		s.mu.Unlock()
		if err != nil {
			s.close(err) // keep waking siblings
			return item{}, false, false, err
		}
		select {
		case <-s.notify:
		case <-wake:
			return item{}, false, true, nil
		case <-ctx.Done():
			return item{}, false, false, ctx.Err()
		}
	}
}

// queued returns how many deliveries wait in s.
func (s *Subscription) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// drain removes what is still queued.
func (s *Subscription) drain() []*Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Msg
	for _, it := range s.queue {
		if it.m != nil {
			out = append(out, it.m)
		}
	}
	s.queue = nil
	return out
}

// Subscribe starts a push consumer of group on topic and waits for the
// server's +OK. Only WithMaxInFlight applies. Stop it with Stop; deliveries
// it still holds are then handed back (nacked) to the server.
func (c *Conn) Subscribe(ctx context.Context, topic, group string, opts ...ConsumeOption) (*Subscription, error) {
	o, err := c.consumeOptions(opts)
	if err != nil {
		return nil, err
	}
	return c.subscribe(ctx, topic, group, o.maxInFlight)
}

// Next blocks until the next delivery, ctx is done, or the subscription
// ends (ErrClosed, or the Conn's close reason). A delivery that failed its
// CRC check is returned as a *CorruptError (and was nacked), never as data.
func (s *Subscription) Next(ctx context.Context) (*Msg, error) {
	it, ok, err := s.next(ctx)
	if !ok {
		return nil, err
	}
	return it.m, it.err
}

// Stop unsubscribes and hands back what was delivered but not returned by
// Next. Messages already returned stay the caller's to settle. It waits
// for the server's answer to the UNSUB until ctx is done (then it returns
// ctx.Err(); the subscription is ended on this side all the same and what
// arrives later is handed back).
func (s *Subscription) Stop(ctx context.Context) error {
	return s.conn.unsubscribe(ctx, s)
}

// subscribe registers a push subscription and waits for the server's +OK.
func (c *Conn) subscribe(ctx context.Context, topic, group string, maxInFlight int) (*Subscription, error) {
	if err := checkSubject(topic); err != nil {
		return nil, err
	}
	if err := checkSubject(group); err != nil {
		return nil, fmt.Errorf("group: %w", err)
	}
	s := &Subscription{conn: c, topic: topic, group: group, maxInFlight: maxInFlight}
	if err := c.register(ctx, s); err != nil {
		return nil, fmt.Errorf("fibril: SUB %s %s: %w", topic, group, err)
	}
	return s, nil
}

// register gives s its sid, lists it and sends its SUB, waiting for the
// +OK; on failure s is forgotten again.
func (c *Conn) register(ctx context.Context, s *Subscription) error {
	s.notify = make(chan struct{}, 1)
	c.mu.Lock()
	c.nextSID++
	s.sid = c.nextSID
	c.subs[s.sid] = s
	c.mu.Unlock()
	if _, err := c.roundTrip(ctx, reqOK, s.subFrame()); err != nil {
		c.mu.Lock()
		delete(c.subs, s.sid)
		c.mu.Unlock()
		return err
	}
	return nil
}

// unsubscribeWait is how long Consume and Messages wait for the answer to
// their UNSUB once their own ctx has ended.
const unsubscribeWait = 5 * time.Second

// unsubscribe stops deliveries to s and hands back what it still holds,
// waiting for the UNSUB's answer until ctx is done. The UNSUB is written
// before the hand-backs (NACKs), so the server does not push them to s
// again; deliveries that arrive after s left c.subs are handed back by the
// read loop.
func (c *Conn) unsubscribe(ctx context.Context, s *Subscription) error {
	c.mu.Lock()
	_, live := c.subs[s.sid]
	delete(c.subs, s.sid)
	c.mu.Unlock()
	s.close(ErrClosed) // Next and the workers return now
	var err error
	if live {
		r := newRequest(reqOK, protocol.AppendUnsub(nil, strconv.FormatUint(s.sid, 10), 0))
		if err = c.send(r); err == nil {
			err = c.wait(ctx, r)
		}
	}
	for _, m := range s.drain() {
		c.releaseAsync(m)
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		c.cfg.logger.Debug("fibril: UNSUB failed", "sid", s.sid, "err", err)
		return fmt.Errorf("fibril: UNSUB %s %s: %w", s.topic, s.group, err)
	}
	return nil
}

// unsubscribeDetached is unsubscribe for consumers whose ctx has ended: it
// waits up to unsubscribeWait for the answer.
func (c *Conn) unsubscribeDetached(ctx context.Context, s *Subscription) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unsubscribeWait)
	defer cancel()
	_ = c.unsubscribe(uctx, s) // logged; the deliveries are handed back either way
}

// Consume runs handler for every message of the durable group on topic,
// pushed by the server with at most WithMaxInFlight unsettled deliveries and
// WithConcurrency handlers at once. It blocks until ctx is done or the Conn
// is closed (it returns ErrClosed or the reason). When ctx ends, no new
// handler starts, even with deliveries buffered: Consume waits for the
// handlers running then, hands the buffered deliveries back (NACK, at once),
// waits for its acks' answers and returns nil. Corrupt deliveries go to the
// error handler, never to handler.
func (c *Conn) Consume(ctx context.Context, topic, group string, handler Handler, opts ...ConsumeOption) error {
	o, err := c.consumeOptions(opts)
	if err != nil {
		return err
	}
	if handler == nil {
		return fmt.Errorf("%w: nil handler", ErrInvalidArgument)
	}
	s, err := c.subscribe(ctx, topic, group, o.maxInFlight)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errc := make(chan error, o.concurrency)
	for range o.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- c.consumeWorker(ctx, s, handler, o)
		}()
	}
	wg.Wait()
	c.unsubscribeDetached(ctx, s)
	err = <-errc
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// keepLeased extends m's lease every o.autoExtend until the returned stop
// is called (a no-op without WithAutoExtend).
func (c *Conn) keepLeased(ctx context.Context, m *Msg, o consumeOpts) (stop func()) {
	if o.autoExtend <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tk := time.NewTicker(o.autoExtend)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				if m.settled() {
					return
				}
				if err := m.InProgress(ctx); err != nil && ctx.Err() == nil {
					o.onError(err)
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

// Messages returns an iterator over the durable group on topic (push, like
// Consume). Each step yields a message or a non-fatal error (a corrupt
// delivery); the caller settles each message (AckAsync does not wait for
// the server's commit, Ack does). The iteration ends when ctx is
// done, the caller breaks (messages still buffered are handed back), or the
// Conn closes (the last step yields the reason).
func (c *Conn) Messages(ctx context.Context, topic, group string, opts ...ConsumeOption) iter.Seq2[*Msg, error] {
	return func(yield func(*Msg, error) bool) {
		o, err := c.consumeOptions(opts)
		if err != nil {
			yield(nil, err)
			return
		}
		s, err := c.subscribe(ctx, topic, group, o.maxInFlight)
		if err != nil {
			yield(nil, err)
			return
		}
		defer c.unsubscribeDetached(ctx, s)
		for {
			it, ok, err := s.next(ctx)
			if !ok {
				if ctx.Err() == nil {
					yield(nil, err)
				}
				return
			}
			if !yield(it.m, it.err) {
				return
			}
		}
	}
}

// Fetch pulls up to max ready messages from the durable group on topic
// (POLL), waiting up to wait for the first one. It returns the verified
// messages; if some deliveries failed their CRC check it also returns an
// error wrapping ErrCorruptDelivery (those were nacked). If ctx ends first,
// it returns ctx.Err() and any messages that arrive later are handed back.
func (c *Conn) Fetch(ctx context.Context, topic, group string, max int, wait time.Duration) ([]*Msg, error) {
	if err := checkSubject(topic); err != nil {
		return nil, err
	}
	if err := checkSubject(group); err != nil {
		return nil, err
	}
	if max < 1 || wait < 0 {
		return nil, fmt.Errorf("%w: Fetch needs max >= 1 and wait >= 0", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := newPoll(protocol.AppendPoll(nil, topic, group, max, wait.Milliseconds()), min(max, 64), wait)
	if err := c.send(r); err != nil {
		return nil, fmt.Errorf("fibril: POLL %s %s: %w", topic, group, err)
	}
	if err := c.wait(ctx, r); err != nil {
		return nil, fmt.Errorf("fibril: POLL %s %s: %w", topic, group, err)
	}
	return c.pollResult(r)
}
