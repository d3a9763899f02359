package main

// --client sdk: the Fibril side through the Go SDK (package sdk) instead of
// the raw wire, to show what the SDK costs on top of the server. Durable
// mode, pull only: PublishAsync with its futures (the SDK's window is the
// server's max_unconfirmed or --window), a Fetcher(--batch) that keeps two
// POLLs out while a batch is handled (as the wire client does) and one
// AckAllAsync per batch, so neither the next POLL nor the ack's commit is
// waited for. Topic setup, settled() and plain mode use the raw driver.

import (
	"context"
	"errors"
	"fmt"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"
)

type sdkDriver struct {
	*fibrilDriver
}

func (d *sdkDriver) connect(ctx context.Context) (*fibril.Conn, error) {
	opts := []fibril.Option{fibril.WithName("fibril-bench"), fibril.WithoutReconnect(),
		fibril.WithMaxUnconfirmed(d.cfg.Window), fibril.WithCRC(d.cfg.CRC)}
	return fibril.Connect(ctx, "nats://"+d.addr, opts...)
}

func (d *sdkDriver) publish(ctx context.Context, idx int, n int64, st *runState) (pubStats, error) {
	var ps pubStats
	c, err := d.connect(ctx)
	if err != nil {
		return ps, err
	}
	defer c.Close()
	payload := template(d.cfg.Size)
	var fifo []*fibril.PubFuture
	reap := func(block bool) {
		for len(fifo) > 0 {
			f := fifo[0]
			if block {
				<-f.Done()
			} else {
				select {
				case <-f.Done():
				default:
					return
				}
			}
			if _, err := f.Result(); err != nil {
				ps.errors++
				if ps.firstErr == "" {
					ps.firstErr = err.Error()
				}
			} else {
				st.published.Add(1)
			}
			fifo = fifo[1:]
		}
	}
	ps.start = time.Now()
	var seq uint64
	for n < 0 || int64(seq) < n {
		if n < 0 && st.pubOver() {
			break
		}
		stamp(payload, msgID(idx, seq), time.Now().UnixNano())
		f, err := c.PublishAsync(ctx, d.cfg.Topic, payload) // data is copied
		if err != nil {
			return ps, fmt.Errorf("publish: %w", err)
		}
		fifo = append(fifo, f)
		reap(false)
		seq++
	}
	reap(true)
	ps.end, ps.sent = time.Now(), seq
	return ps, nil
}

func (d *sdkDriver) consume(ctx context.Context, idx int, st *runState, ready func()) error {
	if d.cfg.Mode == "plain" || d.cfg.Consume != "pull" {
		return d.fibrilDriver.consume(ctx, idx, st, ready)
	}
	c, err := d.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	// two POLLs out: the next batch's POLL was sent before this batch's
	// ACK, so it is not answered after that ACK's commit
	f, err := c.NewFetcher(d.cfg.Topic, d.cfg.Group, d.cfg.Batch, time.Second, fibril.WithPrefetch(2))
	if err != nil {
		return err
	}
	defer f.Close()
	var acks []*fibril.AckFuture // answered in order: reap from the front
	reap := func(block bool) error {
		for len(acks) > 0 {
			if !block {
				select {
				case <-acks[0].Done():
				default:
					return nil
				}
			}
			if err := acks[0].Wait(ctx); err != nil {
				return fmt.Errorf("ack: %w", err)
			}
			acks = acks[1:]
		}
		return nil
	}
	ready()
	for ctx.Err() == nil && !st.isDone() {
		msgs, err := f.Next(ctx)
		if err != nil && len(msgs) == 0 {
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return nil
			}
			return fmt.Errorf("fetch: %w", err)
		}
		for _, m := range msgs {
			st.deliver(idx, m.Data, m.DeliveryCount(), nil)
		}
		if len(msgs) > 0 {
			acks = append(acks, c.AckAllAsync(msgs...))
		}
		if err := reap(false); err != nil {
			return err
		}
	}
	if err := reap(true); err != nil && ctx.Err() == nil {
		return err
	}
	// Stay connected until the run ends: closing would hand back leases of
	// deliveries whose acks are still on their way.
	<-ctx.Done()
	return nil
}
