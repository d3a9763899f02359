package broker

import (
	"fmt"

	"github.com/fibrilmq/fibril/server/seglog"
)

// retentionDue reports whether a retention pass may have work: messages
// below the lowest frontier (workqueue) or limits to enforce.
func (p *partition) retentionDue() bool {
	if p.t.cfg.MaxAgeMs > 0 && p.last >= p.first {
		return true // time passes: checked every RetentionInterval
	}
	return p.retentionDueNow()
}

// retentionDueNow is retentionDue without the age limit: what a pass may
// have to do whatever the time.
func (p *partition) retentionDueNow() bool {
	cfg := &p.t.cfg
	floor := max(p.first, p.askedCut) // the log may keep a partial segment
	if p.last >= p.first {
		if cfg.MaxMsgs > 0 && p.last >= Seq(cfg.MaxMsgs) && p.last-Seq(cfg.MaxMsgs)+1 > floor {
			return true
		}
		if cfg.MaxBytes > 0 && p.sizes.from(floor) > cfg.MaxBytes {
			return true
		}
	}
	if p.purgeFloor > floor && p.purgeFloor > p.first {
		return true
	}
	return cfg.Retention == RetentionWorkqueue && len(p.order) > 0 && p.safeLow > floor
}

// retain applies the topic's retention at most once per RetentionInterval:
// workqueue deletes below the lowest group frontier (kept while no group
// exists); limits deletes by count, age and bytes (sizeLedger). The log
// deletes whole segments only; Bounds says what remains.
func (p *partition) retain() {
	if !p.retentionDue() || p.now-p.lastRetention < int64(p.t.b.opts.RetentionInterval) {
		return
	}
	p.lastRetention = p.now
	cut := p.first
	cfg := &p.t.cfg
	if cfg.Retention == RetentionWorkqueue && len(p.order) > 0 {
		cut = p.safeLow // settles not yet durable must not delete anything
	}
	{
		if cfg.MaxMsgs > 0 && int64(p.last-p.first+1) > cfg.MaxMsgs {
			cut = max(cut, p.last-Seq(cfg.MaxMsgs)+1)
		}
		if cfg.MaxBytes > 0 {
			cut = max(cut, p.sizes.cutFor(cut, cfg.MaxBytes))
		}
		if cfg.MaxAgeMs > 0 {
			cut = max(cut, p.firstYoungerThan(p.now-cfg.MaxAgeMs*1e6, cut))
		}
	}
	cut = max(cut, p.purgeFloor)
	// Deliveries waiting for their batch to be durable borrow their
	// records, and so do collecting polls (dispatch.go).
	if low, _, ok := p.borrowed(); ok && cut > low {
		cut = low
	}
	cut = p.sideKeep(cut)
	if cut <= p.first {
		return
	}
	if err := p.data.TruncateFront(cut); err != nil {
		p.t.b.logf("%v", fmt.Errorf("topic %s partition %d: retention: %w", p.t.name, p.idx, err))
		return
	}
	p.askedCut = cut
	prevFirst := p.first
	p.first, _ = p.data.Bounds()
	if p.first > prevFirst {
		// Nothing holds records of the dropped segments any more (callbacks
		// borrow records only while they run; pending deliveries are at or
		// above the cut), so release them now, with a second call, rather
		// than at the next pass a RetentionInterval later: the log offers
		// their files as spares to its next rolls only once released, and
		// a roll that finds none creates a file whose fsyncs cost more.
		if err := p.data.TruncateFront(cut); err != nil {
			p.t.b.logf("%v", fmt.Errorf("topic %s partition %d: retention: %w", p.t.name, p.idx, err))
		}
	}
	p.sizes.trim(p.first)
	for _, gp := range p.order {
		gp.truncatedTo(p.first)
	}
}

// firstYoungerThan returns the first offset at or after from whose record
// is not older than cutoff (unix ns).
func (p *partition) firstYoungerThan(cutoff int64, from Seq) Seq {
	at := from
	for at <= p.last {
		stop, was := false, at
		err := p.data.Scan(at, 1<<20, func(r seglog.Record) bool {
			if r.Time >= cutoff {
				stop = true
				return false
			}
			at = r.Seq + 1
			return true
		})
		if err != nil || stop || at == was {
			break
		}
	}
	return at
}
