package broker

import (
	"os"
	"sync/atomic"
	"time"
)

// Observer receives the broker's durability measurements, for metrics. Its
// methods are called on internal goroutines (partition actors and their
// syncers), possibly concurrently; they must be quick and safe for
// concurrent use, and must not call blocking methods of this package.
type Observer interface {
	// ObserveSync reports one commit that made records durable: d is how
	// long the fsync took (durability "group": each of a partition's two
	// logs is fsynced by a lane of its own, and each fsync is reported;
	// durability "sync": the data append), records how many published
	// messages it made durable (the group-commit batch size; 0 for an
	// fsync of the consumer-state event log).
	ObserveSync(d time.Duration, records int)
}

// BrokerStats are broker-wide totals since Open, read without locks.
type BrokerStats struct {
	Syncs         uint64        `json:"syncs"`          // commits observed (see Observer)
	SyncTime      time.Duration `json:"sync_time_ns"`   // their total duration
	SyncedRecords uint64        `json:"synced_records"` // messages they made durable
}

// brokerStats are the atomics behind BrokerStats.
type brokerStats struct {
	syncs, syncNs, syncRecs atomic.Uint64
}

// observeSync records one commit and passes it to the Observer.
func (b *Broker) observeSync(d time.Duration, records int) {
	b.st.syncs.Add(1)
	b.st.syncNs.Add(uint64(d))
	b.st.syncRecs.Add(uint64(records))
	if o := b.opts.Observer; o != nil {
		o.ObserveSync(d, records)
	}
}

// Stats returns the broker-wide totals. It does not block.
func (b *Broker) Stats() BrokerStats {
	return BrokerStats{
		Syncs:         b.st.syncs.Load(),
		SyncTime:      time.Duration(b.st.syncNs.Load()),
		SyncedRecords: b.st.syncRecs.Load(),
	}
}

// partStats are a partition's gauges and counters: written by its actor
// (store, in publishStats; restored once before the actor starts), read by
// anyone without locks (Topic.Info, the backpressure of max_unsettled_*).
type partStats struct {
	first, last atomic.Uint64 // the offsets readers can still read
	unsettled   atomic.Int64  // messages not settled by every group
	bytes       atomic.Int64  // bytes of retained messages (sizeLedger)
	unsetBytes  atomic.Int64  // bytes of messages not settled by every group
	published   atomic.Uint64 // messages appended since open
	// restored: events restoreSideEvents put back into the event log from
	// side copies when the broker opened.
	restored atomic.Uint64
}

// store publishes one round's values: the readable offsets first..last,
// low the lowest offset some group has not settled, the bytes from first
// and from low, and the published count. It reports whether the unsettled
// count went down (publishers blocked by max_unsettled_* may go on).
func (s *partStats) store(first, last, low Seq, bytes, unsetBytes int64, published uint64) (shrank bool) {
	s.first.Store(uint64(first))
	s.last.Store(uint64(last))
	var unsettled int64
	if last >= low {
		unsettled = int64(last - low + 1)
	}
	old := s.unsettled.Swap(unsettled)
	s.bytes.Store(bytes)
	s.unsetBytes.Store(unsetBytes)
	s.published.Store(published)
	return unsettled < old
}

// info is the PartitionInfo the stats describe (without Partition and
// DiskBytes).
func (s *partStats) info() PartitionInfo {
	f, l := Seq(s.first.Load()), Seq(s.last.Load())
	pi := PartitionInfo{FirstSeq: f, LastSeq: l, Unsettled: s.unsettled.Load(),
		Bytes: s.bytes.Load(), UnsettledBytes: s.unsetBytes.Load(), Published: s.published.Load(),
		RestoredEvents: s.restored.Load()}
	if l >= f {
		pi.Messages = int64(l - f + 1)
	}
	return pi
}

// GroupCounters are a group's monotonic totals over its life: kept in the
// partitions' snapshots and recounted from the events that follow on Open,
// so a restart does not reset them (with durability "none" a crash may lose
// the last unsynced events, and their counts). They never go down.
type GroupCounters struct {
	Delivered    uint64 `json:"delivered"`     // deliveries, redeliveries included
	Redelivered  uint64 `json:"redelivered"`   // deliveries with attempt > 1
	Acked        uint64 `json:"acked"`         // acks that settled a message
	Nacked       uint64 `json:"nacked"`        // nacks of a leased delivery
	Rejected     uint64 `json:"rejected"`      // rejects of a leased delivery
	DeadLettered uint64 `json:"dead_lettered"` // settled by a durable dead-letter copy (or dropped: no dead-letter topic)
	Expired      uint64 `json:"expired"`       // leases that ran out
}

func (c *GroupCounters) add(o GroupCounters) {
	c.Delivered += o.Delivered
	c.Redelivered += o.Redelivered
	c.Acked += o.Acked
	c.Nacked += o.Nacked
	c.Rejected += o.Rejected
	c.DeadLettered += o.DeadLettered
	c.Expired += o.Expired
}

// groupCounterAtomics publish a groupState's counters to readers.
type groupCounterAtomics struct {
	delivered, redelivered, acked, nacked, rejected, deadLettered, expired atomic.Uint64
}

func (a *groupCounterAtomics) store(c *GroupCounters) {
	a.delivered.Store(c.Delivered)
	a.redelivered.Store(c.Redelivered)
	a.acked.Store(c.Acked)
	a.nacked.Store(c.Nacked)
	a.rejected.Store(c.Rejected)
	a.deadLettered.Store(c.DeadLettered)
	a.expired.Store(c.Expired)
}

func (a *groupCounterAtomics) load() GroupCounters {
	return GroupCounters{
		Delivered:    a.delivered.Load(),
		Redelivered:  a.redelivered.Load(),
		Acked:        a.acked.Load(),
		Nacked:       a.nacked.Load(),
		Rejected:     a.rejected.Load(),
		DeadLettered: a.deadLettered.Load(),
		Expired:      a.expired.Load(),
	}
}

// GroupPartitionInfo is a group's state in one partition.
type GroupPartitionInfo struct {
	Partition Partition `json:"partition"`
	Frontier  Seq       `json:"frontier"` // lowest offset the group has not settled
	Next      Seq       `json:"next"`     // lowest offset never delivered to the group
	Pending   int64     `json:"pending"`  // retained and not settled, inflight included
	Inflight  int64     `json:"inflight"` // leased now
	Ready     int64     `json:"ready"`    // pending and not leased (nack delays included)
	// OldestUnackedMs is the age of the oldest message the group has not
	// settled (0: none).
	OldestUnackedMs int64 `json:"oldest_unacked_ms"`
	// DamagedSeq is the damaged offset the group stopped at in this
	// partition (0: none): nothing at or past it is delivered until the
	// data is restored or repaired. DamagedError says what was found.
	DamagedSeq   Seq    `json:"damaged_seq,omitempty"`
	DamagedError string `json:"damaged_error,omitempty"`
	GroupCounters
}

// groupPartStats is read by Info; the actor writes it in publishStats.
type groupPartStats struct {
	stInflight atomic.Int64
	stPending  atomic.Int64 // retained, not settled (ready + inflight + unseen)
	stFrontier atomic.Uint64
	stNext     atomic.Uint64
	stOldest   atomic.Int64 // store time (unix ns) of the frontier's record; 0: none
	stCounts   groupCounterAtomics
	// stDamagedSeq/stDamagedErr: the group stopped at this damaged
	// offset (0: not stopped) and what the read found (damage.go).
	stDamagedSeq atomic.Uint64
	stDamagedErr atomic.Pointer[string]

	oldestSeq  Seq   // actor: the frontier whose time stOldest holds
	oldestTime int64 // actor
}

func (gp *groupPart) info(idx Partition, now int64) GroupPartitionInfo {
	in := GroupPartitionInfo{
		Partition: idx,
		Frontier:  Seq(gp.stFrontier.Load()),
		Next:      Seq(gp.stNext.Load()),
		Pending:   gp.stPending.Load(),
		Inflight:  gp.stInflight.Load(),
	}
	in.Ready = max(in.Pending-in.Inflight, 0)
	if t := gp.stOldest.Load(); t != 0 && in.Pending > 0 && now > t {
		in.OldestUnackedMs = (now - t) / 1e6
	}
	in.GroupCounters = gp.stCounts.load()
	if seq := gp.stDamagedSeq.Load(); seq != 0 {
		in.DamagedSeq = Seq(seq)
		if e := gp.stDamagedErr.Load(); e != nil {
			in.DamagedError = *e
		}
	}
	return in
}

// publishGroupStats (actor) copies one group's gauges and counters.
func (p *partition) publishGroupStats(gp *groupPart) {
	gp.stInflight.Store(int64(gp.nInflight))
	f := gp.frontier()
	pend := int64(0)
	if p.last >= f {
		pend = int64(p.last-f+1) - int64(gp.acks.above)
	}
	gp.stPending.Store(max(pend, 0))
	gp.stFrontier.Store(uint64(f))
	gp.stNext.Store(uint64(gp.next))
	if f > p.last || f < p.first {
		gp.oldestSeq, gp.oldestTime = 0, 0
	} else if f != gp.oldestSeq {
		// one read per round, and only when the frontier moved
		gp.oldestSeq, gp.oldestTime = f, 0
		if rec, err := p.data.Read(f); err == nil {
			gp.oldestTime = rec.Time
		}
	}
	gp.stOldest.Store(gp.oldestTime)
	gp.stCounts.store(&gp.cnt)
}

// diskBytes returns the size of the partition's files (logs, snapshot).
func (p *partition) diskBytes() int64 {
	var n int64
	var walk func(dir string)
	walk = func(dir string) {
		es, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range es {
			if e.IsDir() {
				walk(dir + string(os.PathSeparator) + e.Name())
				continue
			}
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
	}
	walk(p.dir)
	return n
}
