package broker

// Delayed delivery (SPEC.md 10.1 allow_msg_delay, the Fibril-Delay and
// Fibril-Deliver-At headers): a message is stored at once, and no group
// hands it out before its due time, read from the record (its stored time
// plus Fibril-Delay, or Fibril-Deliver-At) when the group's head reaches
// it (deliverable, filter.go). Not yet due, it is held back for the group
// (groupState.defer): a pending entry with no delivery, in stDelayed, on
// the group's timer heap, so the messages after it flow on and the actor
// wakes at its time; an evDefer event keeps it pending across restarts
// (restored readies it, and deliverable holds it back again until due).
// A held-back message costs its pending entry and timer, not its payload.

import (
	"fmt"
	"time"

	"github.com/fibrilmq/fibril/wire"
)

// checkDelayHeaders refuses a publish whose delay headers the partitions
// could not read, or that the topic does not allow (allow_msg_delay).
func (t *Topic) checkDelayHeaders(h []byte) error {
	if len(h) == 0 {
		return nil
	}
	for _, name := range [...]string{wire.HeaderDelay, wire.HeaderDeliverAt} {
		v, ok := wire.HeaderValue(h, name)
		if !ok {
			continue
		}
		if !t.cfg.AllowMsgDelay {
			return fmt.Errorf("%w: %s: topic %s does not allow delayed messages (allow_msg_delay)", ErrInvalidHeader, name, t.name)
		}
		if _, err := parseDue(name, v, 0); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidHeader, err)
		}
	}
	return nil
}

// parseDue reads one delay header's value: the due time, unix ns, of a
// record stored at storedNs.
func parseDue(name string, v []byte, storedNs int64) (int64, error) {
	if name == wire.HeaderDeliverAt {
		at, err := time.Parse(time.RFC3339Nano, string(v))
		if err != nil {
			return 0, fmt.Errorf("%s %q is not an RFC 3339 time", name, v)
		}
		return at.UnixNano(), nil
	}
	d, never, err := parseTTL(v)
	if err != nil || never {
		return 0, fmt.Errorf("%s %q is not a delay: seconds or a duration such as \"90s\" (more than 0, at most 100 years)", name, v)
	}
	return storedNs + int64(d), nil
}

// hasDelays reports whether the topic's messages can be delayed: its
// groups then read each record at their head before handing it out.
func (t *Topic) hasDelays() bool { return t.cfg.AllowMsgDelay }

// dueAt is when the record stored at storedNs with header block hdr may
// first be handed out (0: at once). The later of the two headers wins;
// a value that reads badly (never stored: checkDelayHeaders) is ignored.
func (t *Topic) dueAt(storedNs int64, hdr []byte) int64 {
	if !t.cfg.AllowMsgDelay || len(hdr) == 0 {
		return 0
	}
	var due int64
	for _, name := range [...]string{wire.HeaderDelay, wire.HeaderDeliverAt} {
		if v, ok := wire.HeaderValue(hdr, name); ok {
			if at, err := parseDue(name, v, storedNs); err == nil {
				due = max(due, at)
			}
		}
	}
	return due
}

// deferUntil holds seq back until at: a message take gave (never delivered,
// or pending without a delivery after a restart) that is not yet due.
func (g *groupState) deferUntil(seq Seq, at int64) {
	p, pend := g.pending[seq]
	g.passOver(seq, pend)
	p.state = stDelayed
	p.deadline = at
	g.pending[seq] = p
	g.timers.push(timerEntry{at: at, seq: seq, attempt: p.attempts})
	g.emit(evDefer, seq, uint64(at))
	if len(g.pending) > g.peakPending {
		g.peakPending = len(g.pending)
	}
}
