package broker

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
)

// Side copies: with group commit on a file log, every round's events are
// written twice, to the event log and, as a side record (seglog side.go),
// into the data log after the round's messages. The data log's fsync, which
// a commit waits for anyway, then makes the round's events durable too: a
// commit costs one fsync, not two, and the event log is fsynced off the
// critical path (every evSyncEvery while events arrive, before a snapshot,
// when retention would drop side copies it still needs, at close).
//
// Recovery (restoreSideEvents) reads the side copies written after the last
// record the event log kept and appends the events it lost, in order,
// before the state is replayed. Each event record's meta names the data-log
// position of its round's side copy, so recovery knows where to start.
//
// A side copy stands in for the event fsync only once the event log holds
// a durable record naming a position (sideCopies.ready): before that, recovery
// would not know where to look. A round whose side copy could not be
// written (seglog.ErrSideNoRoom: no side record starts a segment; a failed
// write) waits for the event fsync, and so does every round after it until
// that fsync: recovery stops at the first event missing from both logs.

// evSyncEvery is how often, at most, the event log is fsynced in the
// background while side copies make its events durable
// (Options.eventSyncEvery overrides it in tests).
const evSyncEvery = 100 * time.Millisecond

const (
	sideCopyV1  byte = 1 // side copy: uvarint first event, uvarint count, count × (uvarint length, bytes)
	eventMetaV1 byte = 1 // event record meta: uvarint data position of its side copy
)

// evPos is a round's last event and where its side copy went in the data
// log (the number of the record after it), kept until the event log has
// that event durable: retention keeps the side copies from there on.
type evPos struct{ ev, pos Seq }

func encodeEventMeta(b []byte, pos Seq) []byte {
	return binary.AppendUvarint(append(b, eventMetaV1), uint64(pos))
}

// decodeEventMeta returns the side copy position an event record names
// (ok false: a record written without side copies).
func decodeEventMeta(b []byte) (Seq, bool) {
	if len(b) == 0 || b[0] != eventMetaV1 {
		return 0, false
	}
	pos, n := binary.Uvarint(b[1:])
	return Seq(pos), n > 0
}

func encodeSideCopy(b []byte, first Seq, entries []seglog.Entry) []byte {
	b = append(b, sideCopyV1)
	b = binary.AppendUvarint(b, uint64(first))
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(len(e.Data)))
		b = append(b, e.Data...)
	}
	return b
}

// decodeSideCopy calls fn with each event record of a side copy, numbered
// from first.
func decodeSideCopy(b []byte, fn func(seq Seq, data []byte)) error {
	bad := fmt.Errorf("%w: side copy of events", ErrCorruptState)
	if len(b) == 0 || b[0] != sideCopyV1 {
		return bad
	}
	b = b[1:]
	first, n1 := binary.Uvarint(b)
	if n1 <= 0 || first == 0 {
		return bad
	}
	count, n2 := binary.Uvarint(b[n1:])
	if n2 <= 0 || count > uint64(len(b)) {
		return bad
	}
	b = b[n1+n2:]
	for i := uint64(0); i < count; i++ {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return bad
		}
		fn(Seq(first+i), b[n:n+int(l)])
		b = b[n+int(l):]
	}
	if len(b) != 0 {
		return bad
	}
	return nil
}

// sideChain is the latest unbroken run of side copies: they hold every
// event from..top (none when top < from). A copy that could not be
// written breaks the run; the next one starts another.
type sideChain struct{ from, top Seq }

// add takes a side copy of events first..last.
func (c *sideChain) add(first, last Seq) {
	if first != c.top+1 {
		c.from = first
	}
	c.top = last
}

// covered returns the highest event durable in the event log (up to
// durable) or in the run's copies, once those are durable too: the run
// counts when it starts at or below the event log's durable end, because
// recovery restores the events after that end from the copies in order.
func (c sideChain) covered(durable Seq) Seq {
	if c.from <= durable+1 && c.top > durable {
		return c.top
	}
	return durable
}

// sideCopies (actor) are the side copies of a partition's events in its
// data log: what was written, what is durable, and which events they
// stand in for until the event log has them durable.
type sideCopies struct {
	store   seglog.Store // the data log; nil: side copies are off
	ready   bool         // a durable event record names where side copies start
	failed  bool         // the last side copy's write failed (logged)
	firstEv Seq          // first event record written since Open
	mark    uint64       // the last side copy written
	durable uint64       // the last side copy durable
	chain   sideChain    // the events the latest unbroken run of copies holds
	// evPos: rounds whose events the event log has not made durable yet,
	// oldest first (retention keeps their copies).
	evPos  []evPos
	buf    []byte // the side record being encoded
	meta   []byte // the round's event record meta
	syncAt int64  // when the event lane was last asked (unix ns)
}

func (s *sideCopies) on() bool { return s.store != nil }

// open starts side copies on store; named: the event log's last record
// names where they start (restoreSideEvents); durEvents: the event log's
// end, durable after recovery.
func (s *sideCopies) open(store seglog.Store, named bool, durEvents Seq) {
	s.store, s.ready = store, named
	s.chain = sideChain{from: durEvents + 1, top: durEvents}
}

// covered is what side copies and the event log (durable up to durEvents)
// make durable (before the copies themselves are: batches also wait for
// their mark).
func (s *sideCopies) covered(durEvents Seq) Seq {
	if s.store == nil || !s.ready {
		return durEvents
	}
	return s.chain.covered(durEvents)
}

// eventMeta is the meta of a round's event records: the data-log
// position pos of its side copy (nil when side copies are off). It is
// valid until the next call.
func (s *sideCopies) eventMeta(pos Seq) []byte {
	if s.store == nil {
		return nil
	}
	s.meta = encodeEventMeta(s.meta[:0], pos)
	return s.meta
}

// write writes the round's event records (numbered from first) into the
// data log as a side record at position pos. It returns the error to log:
// the first failure (other than ErrSideNoRoom) since a write succeeded, as
// a full disk fails every round. A failed copy breaks the chain: its
// events wait for the event log's fsync.
func (s *sideCopies) write(first Seq, entries []seglog.Entry, pos Seq, now int64) (logErr error) {
	last := first + Seq(len(entries)) - 1
	s.evPos = append(s.evPos, evPos{ev: last, pos: pos})
	if s.firstEv == 0 {
		s.firstEv, s.syncAt = first, now
	}
	s.buf = encodeSideCopy(s.buf[:0], first, entries)
	mark, err := s.store.AppendSide(seglog.Entry{Data: s.buf, Time: now})
	if cap(s.buf) > 1<<20 {
		s.buf = nil
	}
	if err != nil {
		if !errors.Is(err, seglog.ErrSideNoRoom) && !s.failed {
			s.failed = true
			return err
		}
		return nil
	}
	s.mark, s.failed = mark, false
	s.chain.add(first, last)
	return nil
}

// eventsDurable takes the event log's durable end: copies of events up to
// it are no longer needed.
func (s *sideCopies) eventsDurable(durEvents Seq) {
	if s.store == nil {
		return
	}
	if !s.ready && s.firstEv != 0 && durEvents >= s.firstEv {
		s.ready = true // a durable record names where side copies start
	}
	n := 0
	for n < len(s.evPos) && s.evPos[n].ev <= durEvents {
		n++
	}
	s.evPos = s.evPos[:copy(s.evPos, s.evPos[n:])]
}

// keep clamps a retention cut of the data log so that it keeps every side
// copy of events not yet durable in the event log; clamped says it did.
func (s *sideCopies) keep(cut Seq) (Seq, bool) {
	if len(s.evPos) == 0 || cut < s.evPos[0].pos {
		return cut, false
	}
	return s.evPos[0].pos - 1, true
}

// eventsCovered is what side copies and the event log make durable
// (before the copies themselves are: batches also wait for their mark).
func (p *partition) eventsCovered() Seq { return p.side.covered(p.commit.durEvents) }

// writeSideCopy writes the round's event records (numbered from first) into
// the data log as a side record at position pos.
func (p *partition) writeSideCopy(first Seq, entries []seglog.Entry, pos Seq) {
	if err := p.side.write(first, entries, pos, p.now); err != nil {
		last := first + Seq(len(entries)) - 1
		p.t.b.logf("topic %s partition %d: side copy of events %d..%d: %v (they wait for the event log's fsync)", p.t.name, p.idx, first, last, err)
	}
}

// eventsDurable (actor) takes a durable point of the event log.
func (p *partition) eventsDurable(upto Seq) {
	p.commit.durEvents = max(p.commit.durEvents, upto)
	p.side.eventsDurable(p.commit.durEvents)
}

// batchDurable reports whether b's completions may run: its messages and
// side copies are durable, and its events are, in the event log or in
// side copies.
func (p *partition) batchDurable(b *syncBatch) bool {
	if b.data > p.commit.durData || b.side > p.side.durable {
		return false
	}
	return b.events <= p.eventsCovered()
}

// needEventSync reports whether the event log should be fsynced now: some
// events are durable nowhere else, or the background interval has passed.
func (p *partition) needEventSync() bool {
	if p.commit.durEvents >= p.evw.last {
		return false
	}
	every := cmp.Or(p.t.b.opts.eventSyncEvery, evSyncEvery)
	return p.evw.last > p.eventsCovered() || p.now-p.side.syncAt >= int64(every)
}

// requestEventSync asks the event lane for an fsync if needEventSync.
func (p *partition) requestEventSync() {
	if p.lanes.stopped || !p.needEventSync() {
		return
	}
	p.lanes.ev.want.Store(uint64(p.evw.last))
	p.lanes.ev.request(true)
	p.side.syncAt = p.now
}

// sideKeep clamps a retention cut of the data log so that it keeps every
// side copy of events not yet durable in the event log, and asks for the
// background event fsync that lets the next pass go further (an idle
// partition asks for none otherwise).
func (p *partition) sideKeep(cut Seq) Seq {
	cut, clamped := p.side.keep(cut)
	if clamped {
		p.requestEventSync()
	}
	return cut
}

// restoreSideEvents (Open, before the state is replayed) appends to the
// event log the events it lost in a crash that the data log's side copies
// hold, then makes the event log durable. named: the event log's last
// record names where side copies start (see sideCopies.ready).
func (p *partition) restoreSideEvents() (named bool, err error) {
	if !p.data.SideRecords() {
		return false, nil
	}
	_, last := p.events.Bounds()
	if last == 0 {
		return false, nil // no event record: no side copy ever stood in for one
	}
	r, err := p.events.Read(last)
	if errors.Is(err, seglog.ErrCorrupt) {
		// Lost to damage (a repair recorded it): the side copies cannot
		// be placed; the events they held are forgotten with it.
		p.t.b.logf("WARN topic %s partition %d: the event log's last record %d was lost to damage: side copies of events after it are not restored", p.t.name, p.idx, last)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("event log %s: read its last record %d: %w", filepath.Join(p.dir, eventsLogName), last, err)
	}
	pos, ok := decodeEventMeta(r.Meta)
	if !ok {
		return false, nil // written without side copies
	}
	next := last + 1
	var entries []seglog.Entry
	var decErr error
	gap := Seq(0)
	err = p.data.ScanSide(pos, func(r seglog.Record) bool {
		meta := encodeEventMeta(nil, r.Seq)
		decErr = decodeSideCopy(r.Data, func(seq Seq, data []byte) {
			switch {
			case gap != 0 || seq < next:
			case seq > next:
				gap = seq
			default:
				entries = append(entries, seglog.Entry{Meta: meta, Data: data, Time: r.Time})
				next++
			}
		})
		return decErr == nil && gap == 0
	})
	if err == nil {
		err = decErr
	}
	if err != nil {
		return false, fmt.Errorf("data log %s: the side copies of consumer events kept beside the records from %d on cannot be read (they hold the events the event log %s may lack): %w",
			filepath.Join(p.dir, dataLogName), pos, filepath.Join(p.dir, eventsLogName), err)
	}
	if gap != 0 {
		// Never confirmed: a commit waits for the ones before it, and the
		// events before the gap were durable nowhere.
		p.t.b.logf("topic %s partition %d: side copies of events from %d on follow a gap at %d: never confirmed, not restored", p.t.name, p.idx, gap, next)
	}
	if len(entries) == 0 {
		return true, nil
	}
	first, err := p.events.Append(entries)
	if err == nil && first != last+1 {
		err = fmt.Errorf("%w: restored events numbered from %d, want %d", ErrCorruptState, first, last+1)
	}
	if err == nil {
		_, err = p.events.Sync()
	}
	if err != nil {
		return false, fmt.Errorf("restore events %d..%d from side copies: %w", last+1, next-1, err)
	}
	p.st.restored.Store(uint64(len(entries)))
	p.t.b.logf("topic %s partition %d: restored events %d..%d from their side copies in the data log", p.t.name, p.idx, last+1, next-1)
	return true, nil // the restored records name positions too
}

// openSideCopies (Open, after recovery) starts side copies for a partition
// of durability group on a log that carries side records (checked once,
// here: seglog.Store.SideRecords); named is what restoreSideEvents found.
// Durability sync fsyncs both logs each round instead (syncRound); a store
// without side records (seglog.MemStore, boltstore) makes each commit wait
// for the event log's fsync too.
func (p *partition) openSideCopies(named bool) {
	if !p.data.SideRecords() || p.t.cfg.Durability != DurabilityGroup || p.t.b.opts.noSideCopies {
		return
	}
	p.side.open(p.data, named, p.commit.durEvents) // the event log is durable after recovery
}
