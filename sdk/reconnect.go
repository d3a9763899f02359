package fibril

// Reconnecting (package doc, SPEC.md 11.1): a lost transport keeps its
// unanswered publishes for replay, fails the other unanswered requests, and
// a single reconnect loop dials the servers of the list in turn, starting
// with the one after the server lost and wrapping around, with a backoff
// (and jitter) that grows per full pass over the list; then it
// re-subscribes every push consumer and replays what was queued, in order.

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	addr := c.servers.s[c.servers.cur].addr
	if c.cfg.reconnect.MaxAttempts < 0 {
		// No reconnecting: closed in this same critical section, so no
		// send can find the Conn connected with no transport (it used to,
		// between here and a later closeWith, and wrote to a nil one).
		cleanup := c.closeLocked(fmt.Errorf("%w: %w", ErrClosed, lostErr))
		c.mu.Unlock()
		c.cfg.logger.Warn("fibril: connection lost", "addr", addr, "err", why, "replaying", 0)
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
	for _, r := range c.held {
		c.replayBytes += len(r.frame)
	}
	c.fifo = keep
	c.state = stateReconnecting
	replaying := len(keep) + len(c.held)
	c.wg.Add(1)
	go c.reconnectLoop()
	c.mu.Unlock()
	c.cfg.logger.Warn("fibril: connection lost", "addr", addr, "err", why, "replaying", replaying)
	for _, r := range failed {
		c.finish(r, lostErr)
	}
}

// reconnectLoop dials the servers in turn until one answers, the policy
// gives up or the Conn is closed; then it re-subscribes and replays queued
// requests. Each attempt waits the policy's delay for the pass it is in: the
// backoff grows once per full pass over the list, not once per server.
func (c *Conn) reconnectLoop() {
	defer c.wg.Done()
	p := c.cfg.reconnect
	c.mu.Lock()
	from := c.servers.s[c.servers.cur].addr
	c.mu.Unlock()
	var passes passCounter
	refused := 0
	for attempt := 0; p.MaxAttempts == 0 || attempt < p.MaxAttempts; attempt++ {
		tm := time.NewTimer(p.delay(passes.pass))
		select {
		case <-c.closed:
			tm.Stop()
			return
		case <-tm.C:
		}
		// the list grows only while connected (INFO), so n holds for the loop
		c.mu.Lock()
		n := len(c.servers.s)
		c.servers.cur = (c.servers.cur + 1) % n
		s := c.servers.s[c.servers.cur]
		c.mu.Unlock()
		passes.tried(n)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { // Close aborts a dial in progress
			select {
			case <-c.closed:
				cancel()
			case <-ctx.Done():
			}
		}()
		nc, fr, info, err := c.dial(ctx, s)
		cancel()
		if err != nil {
			c.cfg.logger.Info("fibril: reconnect failed", "addr", s.addr, "attempt", attempt+1, "err", err)
			// A refusal that retrying cannot change (wrong credentials, a
			// TLS requirement) from every server of the list ends the Conn
			// instead of a dial loop.
			var fe *Error
			if errors.As(err, &fe) && fe.Fatal() && !fe.Retriable() {
				if refused++; refused >= n {
					c.closeWith(fmt.Errorf("%w: %w: reconnect refused: %w", ErrClosed, ErrConnectionLost, err))
					return
				}
			} else {
				refused = 0
			}
			continue
		}
		c.mu.Lock()
		if c.state == stateClosed {
			c.mu.Unlock()
			nc.Close()
			return
		}
		logDiscovered := c.setInfoLocked(info)
		c.state = stateConnected
		c.reconnects++
		t := c.install(nc, fr)
		// unconfirmed publishes in the order first sent (a resent one went
		// back into the fifo behind later ones), then what came meanwhile
		queued := append(c.fifo, c.takeHeldLocked()...)
		slices.SortStableFunc(queued, bySeq)
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
		c.cfg.logger.Info("fibril: reconnected", "addr", s.addr, "from", from, "replayed", len(queued))
		logDiscovered()
		return
	}
	c.closeWith(fmt.Errorf("%w: %w: gave up reconnecting after %d attempts", ErrClosed, ErrConnectionLost, p.MaxAttempts))
}

// passCounter counts full passes over a server list of n entries: the
// reconnect backoff grows once per pass, not once per server.
type passCounter struct {
	pass   int // full passes done
	inPass int // servers tried in the current pass
}

// tried records one attempt on a list of n servers.
func (p *passCounter) tried(n int) {
	if p.inPass++; p.inPass >= n {
		p.pass, p.inPass = p.pass+1, 0
	}
}
