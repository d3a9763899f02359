package main

// The NATS side, through the official client (nats.go and its jetstream
// package), so NATS is measured with the client its users run:
//
//   - durable: a file-storage work-queue stream BENCH on --topic, R1; one
//     durable pull consumer (explicit ack, max_ack_pending large enough not
//     to be the limit); publishers use PublishAsync with at most --window
//     acks pending; consumers Fetch(--batch) with explicit Ack (not waited
//     for, as `nats bench` does) or Consume (push-like) with --consume push.
//   - plain: NATS core publish and subscribe, nothing stored.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const natsStream = "BENCH"

type natsDriver struct {
	cfg *Config
	// url is where setup connects; pubURL and conURL where publishers and
	// consumers do (on a cluster: the leaders' nodes, cluster.go).
	url, pubURL, conURL string
	cons                jetstream.Consumer // admin handle for settled()
	place               *ClusterStats
	conns               openConns[*nats.Conn]
}

func (d *natsDriver) connect(url string) (*nats.Conn, error) {
	nc, err := nats.Connect(url, nats.Name("fibril-bench"), nats.NoReconnect(),
		nats.ReconnectBufSize(-1))
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", url, err)
	}
	d.conns.add(nc)
	return nc, nil
}

func (d *natsDriver) close() { d.conns.closeAll((*nats.Conn).Close) }

func (d *natsDriver) setup(ctx context.Context) error {
	d.pubURL, d.conURL = d.url, d.url
	if d.cfg.Mode == "plain" {
		return nil
	}
	nc, err := d.connect(d.url)
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if err := js.DeleteStream(ctx, natsStream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("delete stream: %w", err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: natsStream, Subjects: []string{d.cfg.Topic},
		Storage: jetstream.FileStorage, Retention: jetstream.WorkQueuePolicy, Replicas: d.cfg.NatsReplicas,
		Discard: jetstream.DiscardOld}); err != nil {
		return fmt.Errorf("create stream: %w", err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, natsStream, jetstream.ConsumerConfig{Durable: d.cfg.Group,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		MaxAckPending: max(10000, 4*d.cfg.Subs*d.cfg.Batch)})
	if err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	d.cons = cons
	if len(d.cfg.clusterAddrs) > 0 {
		return d.placeNATS(ctx, js)
	}
	return nil
}

func (d *natsDriver) placement() *ClusterStats { return d.place }

func (d *natsDriver) settled(ctx context.Context) (bool, error) {
	ci, err := d.cons.Info(ctx)
	if err != nil {
		return false, err
	}
	return ci.NumPending == 0 && ci.NumAckPending == 0, nil
}

func (d *natsDriver) publish(ctx context.Context, idx int, n int64, st *runState) (pubStats, error) {
	var ps pubStats
	nc, err := d.connect(d.pubURL)
	if err != nil {
		return ps, err
	}
	defer nc.Close()
	var refused atomic.Uint64
	var firstErr atomic.Pointer[string]
	// Publish-ack latency: sentAt[k % len] is when the k-th async publish
	// was sent, and the k-th answer (ack or error) reads it back. That
	// assumes the answers come in the order of the publishes, which the
	// stream sequence numbers of the acks check: on any inversion no ack
	// latency is reported. Twice the window, so a slot is never reused
	// before its answer is read (nats.go may free a pending slot before it
	// calls the handler).
	sentAt := make([]atomic.Int64, 2*max(d.cfg.Window, 1))
	var sent, answered atomic.Uint64
	var lastSeq atomic.Uint64
	var outOfOrder atomic.Bool
	ackLat := &Histogram{}
	took := func() (sent, lat int64) {
		k := answered.Add(1) - 1
		sent = sentAt[k%uint64(len(sentAt))].Load()
		return sent, time.Now().UnixNano() - sent
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(d.cfg.Window),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
			took()
			refused.Add(1)
			s := err.Error()
			firstErr.CompareAndSwap(nil, &s)
		}),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, _ *nats.Msg, ack *jetstream.PubAck) {
			sent, lat := took()
			if ack.Sequence <= lastSeq.Swap(ack.Sequence) {
				outOfOrder.Store(true)
			}
			if st.measured(sent) {
				ackLat.Add(lat)
			}
			st.published.Add(1)
		}))
	if err != nil {
		return ps, err
	}
	durable := d.cfg.Mode == "durable" && d.cfg.Confirm
	payload := template(d.cfg.Size)
	stall := jetstream.WithStallWait(time.Minute)
	var perPub float64
	if d.cfg.Rate > 0 {
		perPub = float64(d.cfg.Rate) / float64(d.cfg.Pubs)
	}
	ps.start = time.Now()
	var seq uint64
	for n < 0 || int64(seq) < n {
		if n < 0 && st.pubOver() {
			break
		}
		if perPub > 0 {
			due := ps.start.Add(time.Duration(float64(seq) / perPub * 1e9))
			if wait := time.Until(due); wait > 0 {
				_ = nc.Flush()
				time.Sleep(wait)
			}
		}
		now := time.Now().UnixNano()
		stamp(payload, msgID(idx, seq), now)
		if durable {
			// The payload buffer is reused: nats.go copies it into its
			// write buffer inside PublishAsync (no retries are configured).
			for {
				k := sent.Load()
				sentAt[k%uint64(len(sentAt))].Store(now)
				_, err := js.PublishAsync(d.cfg.Topic, payload, stall)
				if err == nil {
					sent.Add(1)
					break
				}
				if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
					return ps, fmt.Errorf("publish: %w", err)
				}
				ps.retries++
			}
		} else {
			if err := nc.Publish(d.cfg.Topic, payload); err != nil {
				return ps, fmt.Errorf("publish: %w", err)
			}
			st.published.Add(1)
		}
		seq++
	}
	if durable {
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			return ps, fmt.Errorf("waiting for %d pub acks: %w", js.PublishAsyncPending(), ctx.Err())
		}
	} else if err := nc.FlushWithContext(ctx); err != nil {
		return ps, fmt.Errorf("flush: %w", err)
	}
	ps.end = time.Now()
	if durable {
		// PublishAsyncComplete may fire before the last handlers ran.
		for wait := time.Now().Add(time.Second); answered.Load() < sent.Load() && time.Now().Before(wait); {
			time.Sleep(time.Millisecond)
		}
		if !outOfOrder.Load() {
			st.confirms[idx].Merge(ackLat)
		}
	}
	ps.sent = seq
	ps.errors = refused.Load()
	if e := firstErr.Load(); e != nil {
		ps.firstErr = *e
	}
	return ps, nil
}

func (d *natsDriver) consume(ctx context.Context, idx int, st *runState, ready func()) error {
	nc, err := d.connect(d.conURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	if d.cfg.Mode == "plain" {
		sub, err := nc.Subscribe(d.cfg.Topic, func(m *nats.Msg) { st.deliver(idx, m.Data, 1, nil) })
		if err != nil {
			return err
		}
		_ = sub.SetPendingLimits(-1, -1)
		if err := nc.Flush(); err != nil {
			return err
		}
		ready()
		<-ctx.Done()
		return nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cons, err := js.Consumer(ctx, natsStream, d.cfg.Group)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	handle := func(m jetstream.Msg) {
		st.deliver(idx, m.Data(), 0, func() int {
			if md, err := m.Metadata(); err == nil {
				return int(md.NumDelivered)
			}
			return 1
		})
		_ = m.Ack()
	}
	ready()
	if d.cfg.Consume == "push" {
		cc, err := cons.Consume(handle, jetstream.PullMaxMessages(d.cfg.Batch))
		if err != nil {
			return err
		}
		<-ctx.Done()
		cc.Stop()
		return nil
	}
	for ctx.Err() == nil && !st.isDone() {
		batch, err := cons.Fetch(d.cfg.Batch, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("fetch: %w", err)
		}
		for m := range batch.Messages() {
			handle(m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && ctx.Err() == nil &&
			!errors.Is(err, nats.ErrConnectionClosed) {
			return fmt.Errorf("fetch: %w", err)
		}
	}
	// Stay connected until the run ends (acks may still be in flight).
	<-ctx.Done()
	return nil
}
