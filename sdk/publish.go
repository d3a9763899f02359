package fibril

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// Position is where a confirmed publish was stored. Stored is false when no
// durable topic captured the subject (it reached only plain subscribers, or
// nobody): the server answered "+OK -". Duplicate is true when the
// publish's message id (WithMsgID) was stored within the topic's duplicate
// window: it was not stored again, and Partition and Seq are the first
// one's ("+OK <partition>:<seq> duplicate").
type Position struct {
	Partition int
	Seq       uint64
	Stored    bool
	Duplicate bool
}

// String renders p as the wire does: "<partition>:<seq>", the same
// followed by " duplicate", or "-".
func (p Position) String() string {
	if !p.Stored {
		return "-"
	}
	if p.Duplicate {
		return fmt.Sprintf("%d:%d duplicate", p.Partition, p.Seq)
	}
	return fmt.Sprintf("%d:%d", p.Partition, p.Seq)
}

// PubOption sets a property of one publish.
type PubOption func(*pubOpts)

type pubOpts struct {
	header Header
}

func (o *pubOpts) set(k, v string) {
	if o.header == nil {
		o.header = Header{}
	}
	o.header.Set(k, v)
}

// WithKey sets the partition key (header Fibril-Key): messages with the same
// key go to the same partition, in order.
func WithKey(key string) PubOption { return func(o *pubOpts) { o.set(HeaderKey, key) } }

// WithMsgID sets the message id (header Nats-Msg-Id): a topic stores one
// message per id within its duplicate window, and confirms a repeat with
// the first one's Position, Duplicate set. Give a publish you may retry
// (after a reconnect) an id so that it is stored once.
func WithMsgID(id string) PubOption { return func(o *pubOpts) { o.set(HeaderMsgID, id) } }

// WithTTL sets the message's time to live (header Nats-TTL, on a topic
// created with AllowMsgTTL): a group hands it out only within ttl of its
// being stored, and past it drops it or dead-letters it (the group's
// OnExpiry). It is sent in whole milliseconds, at least 1.
func WithTTL(ttl time.Duration) PubOption {
	return func(o *pubOpts) {
		o.set(HeaderTTL, strconv.FormatInt(max(ttl.Milliseconds(), 1), 10)+"ms")
	}
}

// WithDelay holds the message back from every group for d after it is
// stored (header Fibril-Delay, on a topic created with AllowMsgDelay): it
// is confirmed at once and handed out once due. Sent in whole ms, at
// least 1.
func WithDelay(d time.Duration) PubOption {
	return func(o *pubOpts) {
		o.set(HeaderDelay, strconv.FormatInt(max(d.Milliseconds(), 1), 10)+"ms")
	}
}

// WithDeliverAt holds the message back from every group until at (header
// Fibril-Deliver-At, RFC 3339, on a topic created with AllowMsgDelay).
func WithDeliverAt(at time.Time) PubOption {
	return func(o *pubOpts) { o.set(HeaderDeliverAt, at.UTC().Format(time.RFC3339Nano)) }
}

// WithHeader adds one header value.
func WithHeader(key, value string) PubOption {
	return func(o *pubOpts) {
		if o.header == nil {
			o.header = Header{}
		}
		o.header.Add(key, value)
	}
}

// WithHeaders adds every value of h.
func WithHeaders(h Header) PubOption {
	return func(o *pubOpts) {
		for k, vs := range h {
			for _, v := range vs {
				WithHeader(k, v)(o)
			}
		}
	}
}

// pubHeader encodes the header block opts ask for (nil when none). The
// options are applied only when there are some: a pubOpts handed to an
// option escapes to the heap, an allocation every plain publish would pay.
func pubHeader(opts []PubOption) ([]byte, error) {
	if len(opts) == 0 {
		return nil, nil
	}
	var o pubOpts
	for _, op := range opts {
		op(&o)
	}
	if len(o.header) == 0 {
		return nil, nil
	}
	return encodeHeader(o.header)
}

// PubFuture is the pending result of PublishAsync.
type PubFuture struct {
	r request // in place: one allocation per publish fewer
}

// Done is closed when the publish is confirmed or failed.
func (f *PubFuture) Done() <-chan struct{} { return f.r.done.wait() }

// Result returns the outcome once Done is closed: the Position, or the
// refusal (an *Error; test with errors.Is), ErrClosed, ErrConnectionLost ...
// Before Done is closed it returns ErrPublishPending.
func (f *PubFuture) Result() (Position, error) {
	if !f.r.done.isFired() {
		return Position{}, ErrPublishPending
	}
	if f.r.err != nil {
		return Position{}, fmt.Errorf("fibril: publish: %w", f.r.err)
	}
	return f.r.pos, f.r.posErr
}

// Wait blocks until the publish is confirmed or failed, or ctx is done (the
// publish itself goes on).
func (f *PubFuture) Wait(ctx context.Context) (Position, error) {
	if f.r.done.isFired() { // no channel needed
		return f.Result()
	}
	select {
	case <-f.r.done.wait():
		return f.Result()
	case <-ctx.Done():
		return Position{}, ctx.Err()
	}
}

// Publish sends data to subject and blocks until the server confirms it is
// durable under its topic's policy (or refuses it, or ctx is done). If the
// connection drops first, the publish is sent again after the reconnect, so
// it may be stored twice but never lost once confirmed. If ctx ends first,
// Publish returns ctx.Err() but the publish goes on and may still be stored.
// A publish answered not_leader (a cluster is electing its partition's
// leader) is sent again on the same connection after a backoff of 50 ms
// doubling to 1 s, until it is confirmed or refused otherwise, or until ctx
// ends (with no deadline: WithRequestTimeout, else 30 s after the first
// not_leader); then it fails with ErrNotLeader, which is retriable. Resent
// publishes keep their order among themselves; publishes sent after them
// may be stored before them.
// A refusal is an *Error (errors.Is with ErrInvalidSubject, ErrTopicFull,
// ...); a payload over the server's max_payload is refused before sending
// (ErrMaxPayload). data is copied.
func (c *Conn) Publish(ctx context.Context, subject string, data []byte, opts ...PubOption) (Position, error) {
	f, err := c.PublishAsync(ctx, subject, data, opts...)
	if err != nil {
		return Position{}, err
	}
	return f.Wait(ctx)
}

// PublishAsync queues a publish and returns at once with its future. It
// blocks only while the unconfirmed-publish window (the server's
// max_unconfirmed) is full, until ctx is done. ctx also bounds the resends
// of the publish if it is answered not_leader (see Publish): a publish whose
// ctx has ended by then fails with ErrNotLeader. data is copied.
func (c *Conn) PublishAsync(ctx context.Context, subject string, data []byte, opts ...PubOption) (*PubFuture, error) {
	if err := checkSubject(subject); err != nil {
		return nil, err
	}
	hdr, err := pubHeader(opts)
	if err != nil {
		return nil, err
	}
	if mp := c.maxPayload.Load(); mp > 0 && int64(len(hdr)+len(data)) > mp {
		// the server would close the connection (max_payload is fatal)
		return nil, fmt.Errorf("fibril: publish refused before sending: %w",
			protocol.NewError(protocol.CodeMaxPayload, fmt.Sprintf("%d bytes, limit %d", len(hdr)+len(data), mp)))
	}
	if err := ctx.Err(); err != nil {
		return nil, err // select below picks at random among ready cases
	}
	if err := c.takeWindow(ctx); err != nil {
		return nil, err
	}
	f := &PubFuture{}
	r := &f.r
	r.kind, r.window, r.ctx = reqPub, true, ctx
	r.frame = appendPub(c.takeFrame(), subject, hdr, data, c.cfg.crc)
	if err := c.send(r); err != nil {
		r.frame = nil
		c.window.release(1)
		return nil, fmt.Errorf("fibril: publish: %w", err)
	}
	return f, nil
}

// takeWindow takes a token of the unconfirmed-publish window, waiting
// while it is full until ctx is done or the Conn closes.
func (c *Conn) takeWindow(ctx context.Context) error {
	if err := c.window.take(ctx, c.closed); err != nil {
		if err == errWindowClosed {
			return c.closeReason()
		}
		return err
	}
	return nil
}

// OutMsg is one message of a PublishBatch.
type OutMsg struct {
	Subject string
	Data    []byte
	Key     string // optional partition key
	MsgID   string // optional message id
	Header  Header // optional headers
}

// PublishBatch pipelines msgs and waits for every confirm. The positions are
// in the order of msgs; on error, the returned error names the first failed
// index and positions holds what was confirmed.
func (c *Conn) PublishBatch(ctx context.Context, msgs []OutMsg) ([]Position, error) {
	futs := make([]*PubFuture, 0, len(msgs))
	for i, m := range msgs {
		var opts []PubOption
		if m.Key != "" {
			opts = append(opts, WithKey(m.Key))
		}
		if m.MsgID != "" {
			opts = append(opts, WithMsgID(m.MsgID))
		}
		if len(m.Header) > 0 {
			opts = append(opts, WithHeaders(m.Header))
		}
		f, err := c.PublishAsync(ctx, m.Subject, m.Data, opts...)
		if err != nil {
			return waitAll(ctx, futs, fmt.Errorf("fibril: batch message %d: %w", i, err))
		}
		futs = append(futs, f)
	}
	return waitAll(ctx, futs, nil)
}

func waitAll(ctx context.Context, futs []*PubFuture, first error) ([]Position, error) {
	pos := make([]Position, len(futs))
	for i, f := range futs {
		p, err := f.Wait(ctx)
		if err != nil && first == nil {
			first = fmt.Errorf("fibril: batch message %d: %w", i, err)
		}
		pos[i] = p
	}
	return pos, first
}

// checkSubject refuses what cannot be written as one wire token.
func checkSubject(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty subject", ErrInvalidArgument)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			return fmt.Errorf("%w: subject %q contains whitespace", ErrInvalidArgument, s)
		}
	}
	return nil
}
