package broker

import (
	"fmt"

	"github.com/fibrilmq/fibril/server/seglog"
)

// retention (actor) paces a partition's retention passes and remembers
// what the last one asked of the data log; retentionCut computes a cut.
type retention struct {
	lastRun  int64 // when the last pass ran (unix ns)
	askedCut Seq   // last TruncateFront point asked of the data log
}

// due reports whether a pass may have work over x: messages below low, the
// lowest durable group frontier (workqueue, with groups), or limits to
// enforce (an age limit with anything stored: time passes, so it is
// checked every RetentionInterval).
func (r *retention) due(cfg *TopicConfig, x *extent, low Seq, groups bool) bool {
	if cfg.MaxAgeMs > 0 && x.last >= x.first {
		return true
	}
	return r.dueNow(cfg, x, low, groups)
}

// dueNow is due without the age limit: what a pass may have to do
// whatever the time (the open-logs cache keeps a partition open for it).
func (r *retention) dueNow(cfg *TopicConfig, x *extent, low Seq, groups bool) bool {
	floor := max(x.first, r.askedCut) // the log may keep a partial segment
	if x.last >= x.first {
		if cfg.MaxMsgs > 0 && x.last >= Seq(cfg.MaxMsgs) && x.last-Seq(cfg.MaxMsgs)+1 > floor {
			return true
		}
		if cfg.MaxBytes > 0 && x.sizes.from(floor) > cfg.MaxBytes {
			return true
		}
	}
	if x.purgeFloor > floor && x.purgeFloor > x.first {
		return true
	}
	return cfg.Retention == RetentionWorkqueue && groups && low > floor
}

// retentionCut is the offset a pass would delete below, before what
// borrowers and side copies keep: workqueue cuts at low, the lowest
// durable group frontier (nothing while no group exists); limits cut by
// count, bytes (sizeLedger) and age (youngest returns the first offset at
// or after from stored at or after cutoff); never below the purge floor.
func retentionCut(cfg *TopicConfig, x *extent, low Seq, groups bool, now int64, youngest func(cutoff int64, from Seq) Seq) Seq {
	cut := x.first
	if cfg.Retention == RetentionWorkqueue && groups {
		cut = low // settles not yet durable must not delete anything
	}
	if cfg.MaxMsgs > 0 && int64(x.last-x.first+1) > cfg.MaxMsgs {
		cut = max(cut, x.last-Seq(cfg.MaxMsgs)+1)
	}
	if cfg.MaxBytes > 0 {
		cut = max(cut, x.sizes.cutFor(cut, cfg.MaxBytes))
	}
	if cfg.MaxAgeMs > 0 {
		cut = max(cut, youngest(now-cfg.MaxAgeMs*1e6, cut))
	}
	return max(cut, x.purgeFloor)
}

// retentionDue reports whether a retention pass may have work.
func (p *partition) retentionDue() bool {
	return p.ret.due(&p.t.cfg, &p.extent, p.commit.safeLow, len(p.order) > 0)
}

// retentionDueNow is retentionDue without the age limit (idle.go).
func (p *partition) retentionDueNow() bool {
	return p.ret.dueNow(&p.t.cfg, &p.extent, p.commit.safeLow, len(p.order) > 0)
}

// retain applies the topic's retention at most once per RetentionInterval:
// workqueue deletes below the lowest group frontier (kept while no group
// exists); limits deletes by count, age and bytes (sizeLedger). The log
// deletes whole segments only; Bounds says what remains.
func (p *partition) retain() {
	if !p.retentionDue() || p.now-p.ret.lastRun < int64(p.t.b.opts.RetentionInterval) {
		return
	}
	p.ret.lastRun = p.now
	cut := retentionCut(&p.t.cfg, &p.extent, p.commit.safeLow, len(p.order) > 0, p.now, p.firstYoungerThan)
	// Deliveries waiting for their batch to be durable borrow their
	// records, and so do collecting polls (dispatch.go).
	if low, _, ok := p.commit.borrowed(); ok && cut > low {
		cut = low
	}
	cut = p.sideKeep(cut)
	cut = p.dedupKeep(cut)
	if cut <= p.first {
		return
	}
	if err := p.data.TruncateFront(cut); err != nil {
		p.t.b.logf("%v", fmt.Errorf("topic %s partition %d: retention: %w", p.t.name, p.idx, err))
		return
	}
	p.ret.askedCut = cut
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
