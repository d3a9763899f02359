package fibril

// Resending publishes answered not_leader (SPEC.md 11.1, point 5): in a
// cluster a partition is, for a moment, led by no node while an election
// runs, and its node answers a publish with -ERR not_leader (nothing was
// stored). Such a publish is held, keeping its window token, and sent
// again on the same connection after a short backoff, until it is
// confirmed, refused otherwise, or its patience ends; then it fails with
// the not_leader error (retriable). Held publishes are resent together, in
// the order they were first sent; publishes sent meanwhile may be stored
// before them (keeping the order exactly would stall every publish of the
// Conn behind an election of one partition). The held publishes are
// bounded by the publish window: each still holds its token.

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

const (
	notLeaderFirstDelay = 50 * time.Millisecond // before the first resend
	notLeaderMaxDelay   = time.Second           // the backoff doubles up to this
	// notLeaderPatience bounds the resends of a publish whose context has
	// no deadline, on a Conn without WithRequestTimeout.
	notLeaderPatience = 30 * time.Second
)

// notLeaderState is a publish's resend state, made at its first
// not_leader (so that a publish never answered not_leader, nearly all of
// them, does not carry it).
type notLeaderState struct {
	until time.Time // its patience ends
	tries uint8     // resends so far
}

// notLeaderDelay is the wait before resend number tries+1.
func notLeaderDelay(tries uint8) time.Duration {
	d := notLeaderFirstDelay
	for i := uint8(0); i < tries && d < notLeaderMaxDelay; i++ {
		d *= 2
	}
	return min(d, notLeaderMaxDelay)
}

// resendable reports whether r, answered err, is a publish to hold for a
// resend: err is not_leader and r's patience has not run out (its context,
// else WithRequestTimeout, else notLeaderPatience, counted from its first
// not_leader). It belongs to the read loop, which owns r until it is held.
func (c *Conn) resendable(r *request, err error, now time.Time) bool {
	var pe *protocol.Error
	if r.kind != reqPub || !errors.As(err, &pe) || pe.Code != protocol.CodeNotLeader {
		return false
	}
	if r.nl == nil {
		patience := notLeaderPatience
		if c.cfg.reqTimeout > 0 {
			patience = c.cfg.reqTimeout
		}
		r.nl = &notLeaderState{until: now.Add(patience)}
		if r.ctx != nil {
			if dl, ok := r.ctx.Deadline(); ok {
				r.nl.until = dl
			}
		}
	}
	if r.ctx != nil && r.ctx.Err() != nil || !now.Before(r.nl.until) {
		return false
	}
	r.err = err // what it fails with if its patience runs out while held
	return true
}

// hold queues rs (publishes answered not_leader, their tokens still held)
// for a resend, in send order, and arms the resend timer.
func (c *Conn) hold(rs []*request) {
	c.mu.Lock()
	if c.state == stateClosed {
		why := c.closeErr
		c.mu.Unlock()
		for _, r := range rs {
			c.finish(r, why)
		}
		return
	}
	for _, r := range rs {
		i, _ := slices.BinarySearchFunc(c.held, r.seq, func(h *request, seq uint64) int {
			return cmp.Compare(h.seq, seq)
		})
		c.held = slices.Insert(c.held, i, r)
	}
	if c.heldTimer == nil {
		c.heldTimer = time.AfterFunc(notLeaderDelay(rs[0].nl.tries), c.resendHeld)
	}
	c.mu.Unlock()
}

// resendHeld writes every held publish again, in send order, on the
// current connection; those whose patience ran out fail with their
// not_leader error instead. While reconnecting it does nothing: the
// reconnect replays the held publishes with the others.
func (c *Conn) resendHeld() {
	c.mu.Lock()
	c.heldTimer = nil
	if c.state != stateConnected {
		c.mu.Unlock()
		return
	}
	now := time.Now()
	var expired []*request
	c.flushAcksLocked(c.tr) // queued acks were issued first
	for _, r := range c.held {
		if r.ctx != nil && r.ctx.Err() != nil || !now.Before(r.nl.until) {
			expired = append(expired, r)
			continue
		}
		r.nl.tries++
		c.fifo = append(c.fifo, r)
		c.writeLocked(c.tr, r.frame)
	}
	clear(c.held)
	c.held = c.held[:0]
	c.mu.Unlock()
	for _, r := range expired {
		c.finish(r, r.err)
	}
}

// takeHeldLocked returns the held publishes and disarms the resend timer
// (a reconnect replays them; a close fails them). Caller holds c.mu.
func (c *Conn) takeHeldLocked() []*request {
	if c.heldTimer != nil {
		c.heldTimer.Stop()
		c.heldTimer = nil
	}
	h := c.held
	c.held = nil
	return h
}

// bySeq orders requests as they were first sent.
func bySeq(a, b *request) int { return cmp.Compare(a.seq, b.seq) }
