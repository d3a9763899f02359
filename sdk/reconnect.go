package fibril

// Reconnecting (package doc): a lost transport keeps its unanswered
// publishes for replay, fails the other unanswered requests, and a single
// reconnect loop dials with backoff and jitter, re-subscribes every push
// consumer and replays what was queued, in order.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// lost handles the loss of transport t: unanswered publishes stay queued for
// replay, other unanswered requests fail with ErrConnectionLost, and a
// reconnect starts (or the Conn closes when reconnecting is off).
func (c *Conn) lost(t *transport, why error) {
	c.mu.Lock()
	if c.tr != t || c.state != stateConnected {
		c.mu.Unlock()
		return
	}
	lostErr := fmt.Errorf("%w: %w", ErrConnectionLost, why)
	if c.cfg.reconnect.MaxAttempts < 0 {
		// No reconnecting: closed in this same critical section, so no
		// send can find the Conn connected with no transport (it used to,
		// between here and a later closeWith, and wrote to a nil one).
		cleanup := c.closeLocked(fmt.Errorf("%w: %w", ErrClosed, lostErr))
		c.mu.Unlock()
		c.cfg.logger.Warn("fibril: connection lost", "addr", c.addr, "err", why, "replaying", 0)
		cleanup()
		return
	}
	c.tr = nil
	close(t.done)
	t.nc.Close()
	var failed, keep []*request
	c.replayBytes = 0
	for _, r := range c.fifo {
		if r.kind == reqPub {
			keep = append(keep, r)
			c.replayBytes += len(r.frame)
		} else {
			failed = append(failed, r)
		}
	}
	c.fifo = keep
	c.state = stateReconnecting
	c.wg.Add(1)
	go c.reconnectLoop()
	c.mu.Unlock()
	c.cfg.logger.Warn("fibril: connection lost", "addr", c.addr, "err", why, "replaying", len(keep))
	for _, r := range failed {
		c.finish(r, lostErr)
	}
}

// reconnectLoop dials with backoff until it succeeds, the policy gives up or
// the Conn is closed; then it re-subscribes and replays queued requests.
func (c *Conn) reconnectLoop() {
	defer c.wg.Done()
	p := c.cfg.reconnect
	for attempt := 0; p.MaxAttempts == 0 || attempt < p.MaxAttempts; attempt++ {
		tm := time.NewTimer(p.delay(attempt))
		select {
		case <-c.closed:
			tm.Stop()
			return
		case <-tm.C:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { // Close aborts a dial in progress
			select {
			case <-c.closed:
				cancel()
			case <-ctx.Done():
			}
		}()
		nc, fr, info, err := c.dial(ctx)
		cancel()
		if err != nil {
			c.cfg.logger.Info("fibril: reconnect failed", "addr", c.addr, "attempt", attempt+1, "err", err)
			// A refusal that retrying cannot change (wrong credentials, a
			// TLS requirement) ends the Conn instead of a dial loop.
			var fe *Error
			if errors.As(err, &fe) && fe.Fatal() && !fe.Retriable() {
				c.closeWith(fmt.Errorf("%w: %w: reconnect refused: %w", ErrClosed, ErrConnectionLost, err))
				return
			}
			continue
		}
		c.mu.Lock()
		if c.state == stateClosed {
			c.mu.Unlock()
			nc.Close()
			return
		}
		c.setInfoLocked(info)
		c.state = stateConnected
		c.reconnects++
		t := c.install(nc, fr)
		queued := c.fifo
		c.fifo = nil
		for _, s := range c.subs {
			r := newRequest(reqSub, s.subFrame())
			c.fifo = append(c.fifo, r)
			c.writeLocked(t, r.frame)
		}
		for _, r := range queued {
			c.fifo = append(c.fifo, r)
			c.writeLocked(t, r.frame)
		}
		c.flushAcksLocked(t) // acks queued while disconnected
		c.replayBytes = 0
		c.mu.Unlock()
		c.cfg.logger.Info("fibril: reconnected", "addr", c.addr, "replayed", len(queued))
		return
	}
	c.closeWith(fmt.Errorf("%w: %w: gave up reconnecting after %d attempts", ErrClosed, ErrConnectionLost, p.MaxAttempts))
}
