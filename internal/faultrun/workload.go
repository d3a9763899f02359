package faultrun

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	fibril "github.com/fibrilmq/fibril/sdk"

	"github.com/fibrilmq/fibril/internal/history"
	"github.com/fibrilmq/fibril/protocol"
)

// client is one SDK connection that reconnects (as a new Conn) after it is
// lost; ops on a lost connection are recorded as indeterminate.
type client struct {
	url    func() string
	within func(func() error) error // where to dial (nil: here)
	name   string
	proc   int
	h      *history.Writer
	// replicated: -ERR not_leader is an unknown outcome (Config.Replicated)
	replicated bool
	c          *fibril.Conn
	lastOK     int64 // when the server last answered on c
}

// conn returns a connected Conn, dialling (bounded by ctx) if needed.
func (cl *client) conn(ctx context.Context) (*fibril.Conn, error) {
	if cl.c != nil {
		return cl.c, nil
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var c *fibril.Conn
	err := dialWithin(cl.within, func() (err error) {
		c, err = fibril.Connect(dctx, cl.url(), fibril.WithName(cl.name), fibril.WithoutReconnect(),
			fibril.WithRequestTimeout(10*time.Second))
		return err
	})
	if err != nil {
		return nil, err
	}
	cl.c, cl.lastOK = c, now()
	return c, nil
}

// dialWithin runs dial inside within (a network namespace), or here.
func dialWithin(within func(func() error) error, dial func() error) error {
	if within == nil {
		return dial()
	}
	return within(dial)
}

// outcome classifies err: nil is ok, a server -ERR is a definite fail,
// anything else (connection lost, timeout) is unknown and drops the
// connection.
func (cl *client) outcome(err error) (history.Outcome, string) {
	if err == nil {
		cl.lastOK = now()
		return history.OK, ""
	}
	var serr *fibril.Error
	if errors.As(err, &serr) {
		cl.lastOK = now()
		if serr.Code == protocol.CodeInternal || (cl.replicated && serr.Code == protocol.CodeNotLeader) {
			// A storage failure: what the command wrote before its fsync
			// failed can still reach the disk (the event log's next
			// fsync, the page cache after a restart), so its effect is
			// unknown (SPEC.md error table); the connection is fine.
			return history.Info, err.Error()
		}
		// Every other -ERR promises that nothing changed: the checker
		// holds the broker to it.
		return history.Fail, err.Error()
	}
	cl.lost()
	return history.Info, err.Error()
}

// lost drops a connection found broken: the server may have seen it end
// any time after its last answer.
func (cl *client) lost() {
	if cl.c == nil {
		return
	}
	from := cl.lastOK
	_ = cl.c.Close()
	cl.c = nil
	_ = cl.h.Add(history.Op{Kind: history.Close, Proc: cl.proc, Outcome: history.OK, Invoke: from, Complete: now(), Err: "lost"})
}

// drop closes the connection on purpose.
func (cl *client) drop() {
	if cl.c == nil {
		return
	}
	inv := now()
	_ = cl.c.Close()
	cl.c = nil
	_ = cl.h.Add(history.Op{Kind: history.Close, Proc: cl.proc, Outcome: history.OK, Invoke: inv, Complete: now()})
}

// pause waits a little before a retry, or until ctx ends.
func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(50 * time.Millisecond):
	}
}

func now() int64 { return time.Now().UnixNano() }

// workload is what runs against the nodes.
type workload struct {
	h       *history.Writer
	url     func() string            // a node to connect to (spread over the nodes)
	within  func(func() error) error // where clients dial (Config.Within)
	topic   string                   // where producers publish
	leaseMs int64                    // the groups' lease, recorded with each delivery
	// replicated: publishes carry a message id, not_leader is unknown
	replicated bool
}

// produce publishes "p<proc>-<n>" values one at a time until ctx ends.
func (w *workload) produce(ctx context.Context, proc int) {
	cl := &client{url: w.url, within: w.within, name: fmt.Sprintf("producer-%d", proc), proc: proc, h: w.h, replicated: w.replicated}
	defer cl.drop()
	for n := 0; ctx.Err() == nil; {
		c, err := cl.conn(ctx)
		if err != nil {
			pause(ctx)
			continue
		}
		v := fmt.Sprintf("p%d-%d", proc, n)
		n++
		op := history.Op{Kind: history.Publish, Proc: proc, Topic: w.topic, Value: v, Invoke: now()}
		var opts []fibril.PubOption
		if w.replicated {
			opts = append(opts, fibril.WithMsgID(v))
		}
		pos, err := c.Publish(context.WithoutCancel(ctx), w.topic, []byte(v), opts...)
		op.Complete = now()
		op.Outcome, op.Err = cl.outcome(err)
		if err == nil {
			if pos.Stored {
				op.Pos = fmt.Sprintf("%d:%d", pos.Partition, pos.Seq) // a duplicate is the first one's place
			} else {
				op.Outcome, op.Err = history.Fail, "not stored"
			}
		}
		_ = w.h.Add(op)
	}
}

// consume polls the group and settles what it gets: mostly acks, some
// nacks, rejects, extends, and some left to expire; with drain it acks
// everything and returns after quiet (no delivery) of the given length.
func (w *workload) consume(ctx context.Context, proc int, topic, group string, rng *rand.Rand, quiet time.Duration) {
	cl := &client{url: w.url, within: w.within, name: fmt.Sprintf("consumer-%d", proc), proc: proc, h: w.h, replicated: w.replicated}
	defer cl.drop()
	drain := quiet > 0
	last := time.Now()
	for ctx.Err() == nil {
		if drain && time.Since(last) > quiet {
			return
		}
		c, err := cl.conn(ctx)
		if err != nil {
			pause(ctx)
			continue
		}
		inv := now()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		msgs, err := c.Fetch(fctx, topic, group, 16, 300*time.Millisecond)
		cancel()
		comp := now()
		if err != nil {
			cl.outcome(err)
			pause(ctx)
			continue
		}
		if len(msgs) > 0 {
			last = time.Now()
		}
		for _, m := range msgs {
			_ = w.h.Add(history.Op{Kind: history.Deliver, Proc: proc, Topic: topic, Group: group, Value: string(m.Data),
				Pos: fmt.Sprintf("%d:%d", m.Partition(), m.Seq()), Handle: m.Handle(), Attempt: m.DeliveryCount(),
				LeaseMs: w.leaseMs, Outcome: history.OK, Invoke: inv, Complete: comp})
		}
		for _, m := range msgs {
			if cl.c == nil {
				break // the connection was lost: the rest expire and come back
			}
			w.settle(ctx, cl, proc, topic, group, m, rng, drain)
		}
	}
}

func (w *workload) settle(ctx context.Context, cl *client, proc int, topic, group string, m *fibril.Msg, rng *rand.Rand, drain bool) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	op := history.Op{Proc: proc, Topic: topic, Group: group, Value: string(m.Data), Handle: m.Handle()}
	do := func(kind history.Kind, f func() error) {
		op.Kind, op.Invoke = kind, now()
		err := f()
		op.Complete = now()
		op.Outcome, op.Err = cl.outcome(err)
		_ = w.h.Add(op)
	}
	r := 0
	if !drain {
		r = rng.IntN(100)
	}
	switch {
	case r < 80:
		do(history.Ack, func() error { return m.Ack(sctx) })
	case r < 88:
		d := time.Duration(rng.IntN(50)) * time.Millisecond
		do(history.Nack, func() error { return m.Nack(sctx, d) })
	case r < 91:
		do(history.Reject, func() error { return m.Reject(sctx) })
	case r < 95:
		op.LeaseMs = w.leaseMs
		do(history.Extend, func() error { return m.InProgress(sctx) })
		if op.Outcome != history.Info {
			op.LeaseMs = 0
			do(history.Ack, func() error { return m.Ack(sctx) })
		}
	default:
		// Left to expire: delivered again after the lease.
	}
}

// runAll runs f(i) for i in [0, n) and waits for all.
func runAll(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); f(i) }()
	}
	wg.Wait()
}
