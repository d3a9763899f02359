package broker

// A group's subject filter (SPEC.md 10.2, filter): the group is served
// only the records whose subject matches one of GroupConfig.Filter; the
// others are settled for it (settleFiltered) as its head reaches them, so
// workqueue retention does not keep them on its account.

import "github.com/fibrilmq/fibril/wire"

// filterScan bounds the records one deliverable call reads to skip
// filtered ones; past it the actor asks itself for another round (so one
// round never reads a whole backlog) and deliverable says no for now.
const filterScan = 1024

// matches reports whether gp's group takes subject (no filter: every one).
func (gp *groupPart) matches(subject string) bool {
	f := gp.g.cfg.Filter
	if len(f) == 0 {
		return true
	}
	for _, x := range f {
		if wire.Match(x, subject) {
			return true
		}
	}
	return false
}

// deliverable (actor) reports whether gp's take now gives an offset to
// deliver, first settling the records at its head that gp's filter does
// not match (never-delivered ones: a redelivery matched when first
// delivered), in a group ordered by key parking those whose key another
// offset holds (keyorder.go), on a topic with TTLs settling those whose
// TTL ran out (ttl.go), and on a topic with delays holding back those not
// yet due (delay.go). A record that cannot be read is left to deliverOne
// (retention, damage).
func (p *partition) deliverable(gp *groupPart) bool {
	ttl, delays, keyed := p.t.hasTTL(), p.t.hasDelays(), gp.keys != nil
	if keyed && !p.learnKeys(gp) {
		p.anotherRound()
		return false
	}
	for range filterScan {
		seq, ok := gp.take(p.last)
		if !ok {
			return false
		}
		po, redelivery := gp.pending[seq]
		filter := len(gp.g.cfg.Filter) > 0 && !redelivery
		delay := delays && po.attempts == 0 // never delivered (a held-back one comes back after a restart)
		key := keyed && !redelivery && !gp.keys.holds(seq)
		if !filter && !ttl && !delay && !key {
			return true
		}
		rec, err := p.data.Read(seq)
		if err != nil {
			return true
		}
		hdrLen, subject, err := decodeMetaReuse(rec.Meta, p.lastSubject)
		if err != nil || hdrLen > len(rec.Data) {
			return true
		}
		if filter && !gp.matches(subject) {
			gp.filtered(seq)
			continue
		}
		if key {
			switch gp.claimKey(seq, rec.Data[:hdrLen]) {
			case keyParked:
				continue
			case keyWait:
				return false // a settle promotes a parked offset, and the actor runs a round then
			}
		}
		var due int64
		if delay {
			due = p.t.dueAt(rec.Time, rec.Data[:hdrLen])
		}
		switch {
		case ttl && p.t.expiredAt(rec.Time, rec.Data[:hdrLen], p.now):
			gp.expired(seq, gp.g.cfg.OnExpiry == wire.ExpiryDeadLetter)
		case due > p.now:
			gp.deferUntil(seq, due)
		default:
			return true
		}
	}
	p.anotherRound()
	return false
}

// anotherRound asks the actor for one more round (at most one asked at a
// time), for what deliverable leaves to the next: filtered, parked,
// expired and held-back records past filterScan, and keys not yet read
// after a restart.
func (p *partition) anotherRound() {
	if !p.scanWake {
		p.scanWake = true
		p.control(func(p *partition) { p.scanWake = false })
	}
}
