package broker

// Message TTL (SPEC.md 10.1 message_ttl_ms and allow_msg_ttl, 10.2
// on_expiry, the Nats-TTL header): a group hands a message out only before its deadline, the time
// the partition stored it plus its TTL. The deadline is not stored: it is
// read from the record (its time and header) when the group's head
// reaches it (deliverable, filter.go), so it survives restarts and power
// cuts with the record; on a topic without TTLs nothing is read. Past it the group settles the message
// without delivery (settleExpired) or dead-letters it (reasonExpired),
// both persisted as events. Expiry is lazy: a message that expires while
// no consumer asks stays counted as ready until one does, and is then
// expired in order, at most filterScan per call before the actor takes
// another round.

import (
	"fmt"
	"strconv"
	"time"

	"github.com/fibrilmq/fibril/wire"
)

// parseTTL reads a Nats-TTL value: a whole number of seconds or a Go
// duration, in (0, MaxTTLMs], or "never" (never is true, d 0).
func parseTTL(v []byte) (d time.Duration, never bool, err error) {
	s := string(v)
	if wire.EqualFold(s, "never") {
		return 0, true, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 1 || n > wire.MaxTTLMs/1000 {
			return 0, false, fmt.Errorf("%s %q: %d seconds out of range [1, %d]", wire.HeaderTTL, s, n, wire.MaxTTLMs/1000)
		}
		return time.Duration(n) * time.Second, false, nil
	}
	d, err = time.ParseDuration(s)
	if err != nil || d <= 0 || d > wire.MaxTTLMs*time.Millisecond {
		return 0, false, fmt.Errorf("%s %q is not a TTL: seconds, a duration such as \"90s\" or \"1h30m\" (more than 0, at most 100 years), or \"never\"", wire.HeaderTTL, s)
	}
	return d, false, nil
}

// checkTTLHeader refuses a publish whose Nats-TTL header the partitions
// could not read, or that the topic does not allow (allow_msg_ttl).
func (t *Topic) checkTTLHeader(h []byte) error {
	if len(h) == 0 {
		return nil
	}
	v, ok := wire.HeaderValue(h, wire.HeaderTTL)
	if !ok {
		return nil
	}
	if !t.cfg.AllowMsgTTL {
		return fmt.Errorf("%w: %s: topic %s does not allow per-message TTL (allow_msg_ttl)", ErrInvalidHeader, wire.HeaderTTL, t.name)
	}
	if _, _, err := parseTTL(v); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidHeader, err)
	}
	return nil
}

// hasTTL reports whether the topic's messages can expire: its groups then
// read each record at their head before handing it out.
func (t *Topic) hasTTL() bool { return t.cfg.MessageTTLMs > 0 || t.cfg.AllowMsgTTL }

// expiredAt reports whether the record stored at storedNs with header
// block hdr is past its deadline at now: stored time plus its Nats-TTL
// (when the topic allows one) or the topic's message_ttl_ms.
func (t *Topic) expiredAt(storedNs int64, hdr []byte, now int64) bool {
	ttl := time.Duration(t.cfg.MessageTTLMs) * time.Millisecond
	if t.cfg.AllowMsgTTL && len(hdr) > 0 {
		if v, ok := wire.HeaderValue(hdr, wire.HeaderTTL); ok {
			d, never, err := parseTTL(v)
			switch {
			case never:
				return false
			case err == nil:
				ttl = d
			}
			// A value checkTTLHeader refused was never stored; one that
			// reads badly now keeps the topic's default.
		}
	}
	return ttl > 0 && now >= storedNs+int64(ttl)
}

// expired settles seq for the group without delivery, or starts its
// dead-letter copy (Fibril-Reason: expired): its TTL ran out. seq is one
// take returned: never delivered, or ready again.
func (g *groupState) expired(seq Seq, deadLetter bool) {
	p, pend := g.pending[seq]
	g.passOver(seq, pend)
	if deadLetter {
		g.toDeadLetter(seq, p, reasonExpired, 0)
		return
	}
	delete(g.pending, seq)
	if g.acks.add(seq) {
		g.emit(evSettle, seq, settleExpired)
	}
	g.unhold(seq)
}
