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
// deliver, first settling the never-delivered records at its head that
// gp's filter does not match. A record that cannot be read is left to
// deliverOne (retention, damage).
func (p *partition) deliverable(gp *groupPart) bool {
	for range filterScan {
		seq, ok := gp.take(p.last)
		if !ok || len(gp.g.cfg.Filter) == 0 {
			return ok
		}
		if _, redelivery := gp.pending[seq]; redelivery {
			return true // it matched when first delivered
		}
		rec, err := p.data.Read(seq)
		if err != nil {
			return true
		}
		_, subject, err := decodeMetaReuse(rec.Meta, p.lastSubject)
		if err != nil || gp.matches(subject) {
			return true
		}
		gp.filtered(seq)
	}
	if !p.filterWake {
		p.filterWake = true
		p.control(func(p *partition) { p.filterWake = false })
	}
	return false
}
