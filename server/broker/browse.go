package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
)

// Read-only views of a partition for operators (the admin API's message
// and event-log browser). Every read runs on the partition's actor, which
// copies what it returns: the log's memory may be unmapped by retention.

// StoredMessage is a copy of one message as stored in a partition.
type StoredMessage struct {
	Partition Partition `json:"partition"`
	Seq       Seq       `json:"seq"`
	Subject   string    `json:"subject"`
	Header    []byte    `json:"header,omitempty"`
	Data      []byte    `json:"data"`
	CRC       uint32    `json:"crc"`
	Time      time.Time `json:"time"`
}

// StateEvent is one consumer-state event of a partition's event log.
type StateEvent struct {
	// Record is the event log record holding the event (page with it).
	Record Seq       `json:"record"`
	Time   time.Time `json:"time"`
	// Kind is one of
	//   - "deliver": leased to Owner; Arg: the delivery count
	//   - "settle": done for good; Reason "ack" (by Owner), "dead_lettered"
	//     (its dead-letter copy is durable), "dropped" (retention removed it
	//     before delivery) or "" (logs written before reasons were kept)
	//   - "nack": Owner nacked it; Arg: the redelivery delay in ns
	//   - "expire": Owner's lease ran out; Arg: the delivery count
	//   - "release": Owner went away (its connection closed) holding the
	//     lease; Arg: the delivery count
	//   - "dead_letter": a dead-letter copy is due; Reason "max_deliveries"
	//     or "rejected" (by Owner); Arg: 1 or 2 respectively
	//   - "init": group created; Offset: where it starts
	//   - "purge": everything below Offset settled; Group 0: the partition
	Kind   string  `json:"kind"`
	Group  GroupID `json:"group"`
	Offset Seq     `json:"offset"`
	Arg    uint64  `json:"arg"`
	// Owner is the consumer the event concerns (the server uses its
	// connection id); 0 when none was recorded (also in older logs).
	Owner  OwnerID `json:"owner,omitempty"`
	Reason string  `json:"reason,omitempty"`
}

var eventKindNames = [...]string{
	evDeliver: "deliver", evSettle: "settle", evDeadLetter: "dead_letter", evInit: "init", evPurge: "purge",
	evNack: "nack", evExpire: "expire", evRelease: "release", evDefer: "defer", evLease: "lease",
}

var settleHowNames = [...]string{settleUnknown: "", settleAck: "ack", settleDeadLettered: "dead_lettered", settleDropped: "dropped", settleLost: "lost", settleFiltered: "filtered", settleExpired: "expired", settleRequeued: "requeued"}

// stateEvent is the operator's view of e, stored in record rec at tm.
func stateEvent(rec Seq, tm time.Time, e event) StateEvent {
	v := StateEvent{Record: rec, Time: tm, Kind: eventKindNames[e.kind], Group: e.group, Offset: e.seq, Arg: e.arg, Owner: e.owner}
	switch e.kind {
	case evSettle:
		if e.arg < uint64(len(settleHowNames)) {
			v.Reason = settleHowNames[e.arg]
		}
	case evDeadLetter:
		v.Reason = reasonText(uint8(e.arg))
	}
	return v
}

// browseMaxBytes bounds the payload one Browse copies.
const browseMaxBytes = 4 << 20

// onActor runs fn on partition idx's actor and waits for it or ctx.
func (t *Topic) onActor(ctx context.Context, idx Partition, fn func(p *partition)) error {
	if int(idx) >= len(t.parts) {
		return fmt.Errorf("%w: topic %s has no partition %d", ErrInvalid, t.name, idx)
	}
	done := make(chan struct{})
	if err := t.parts[idx].controlChecked(func(p *partition) { fn(p); close(done) }); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Browse returns copies of up to limit messages of partition idx from offset
// from on (from the first retained when lower), at most ~4 MiB of them
// (always at least one), and the offset to browse from next. It does not
// consume: no group sees a difference. Purged messages are not shown;
// messages not yet durable are. It blocks on the partition's actor, bounded
// by ctx.
func (t *Topic) Browse(ctx context.Context, idx Partition, from Seq, limit int) ([]StoredMessage, Seq, error) {
	if limit < 1 {
		return nil, from, fmt.Errorf("browse %s: %w: max %d < 1", t.name, ErrInvalid, limit)
	}
	var out []StoredMessage
	next := from
	var serr, cbErr error
	err := t.onActor(ctx, idx, func(p *partition) {
		at := max(from, p.first, p.purgeFloor)
		next = at
		if at > p.last {
			return
		}
		serr = p.data.Scan(at, browseMaxBytes, func(r seglog.Record) bool {
			hdrLen, subject, err := decodeMeta(r.Meta)
			if err != nil || hdrLen > len(r.Data) {
				cbErr = fmt.Errorf("offset %d: %w", r.Seq, ErrCorruptState)
				return false
			}
			m := StoredMessage{Partition: idx, Seq: r.Seq, Subject: subject, CRC: r.CRC, Time: time.Unix(0, r.Time)}
			buf := append([]byte(nil), r.Data...)
			if hdrLen > 0 {
				m.Header = buf[:hdrLen:hdrLen]
			}
			m.Data = buf[hdrLen:]
			out = append(out, m)
			next = r.Seq + 1
			return len(out) < limit && r.Seq < p.last
		})
	})
	if err == nil {
		err = errors.Join(serr, cbErr)
	}
	if err != nil {
		return nil, from, fmt.Errorf("browse %s partition %d: %w", t.name, idx, err)
	}
	return out, next, nil
}

// SeqAt returns the first retained offset of partition idx stored at or
// after tm (the offset after the last when none is), to browse by time. It
// blocks on the partition's actor, bounded by ctx.
func (t *Topic) SeqAt(ctx context.Context, idx Partition, tm time.Time) (Seq, error) {
	var at Seq
	err := t.onActor(ctx, idx, func(p *partition) {
		at = p.firstYoungerThan(tm.UnixNano(), p.readFrom())
	})
	if err != nil {
		return 0, fmt.Errorf("seq at %s partition %d: %w", t.name, idx, err)
	}
	return at, nil
}

// Events returns the consumer-state events of partition idx from event
// record from on, whole records until at least limit events, and the record
// to read from next. Each snapshot drops the events the snapshot before it
// covered, so what is left is recent only: the events since the snapshot
// before last (at least Options.SnapshotEvery of them, segment-granular;
// Close writes a snapshot too). It
// blocks on the partition's actor, bounded by ctx.
func (t *Topic) Events(ctx context.Context, idx Partition, from Seq, limit int) ([]StateEvent, Seq, error) {
	if limit < 1 {
		return nil, from, fmt.Errorf("events %s: %w: max %d < 1", t.name, ErrInvalid, limit)
	}
	var out []StateEvent
	next := from
	var serr, cbErr error
	err := t.onActor(ctx, idx, func(p *partition) {
		first, last := p.events.Bounds()
		at := max(from, first)
		next = at
		if at > last {
			return
		}
		serr = p.events.Scan(at, browseMaxBytes, func(r seglog.Record) bool {
			tm := time.Unix(0, r.Time)
			if err := decodeEvents(r.Data, func(e event) {
				out = append(out, stateEvent(r.Seq, tm, e))
			}); err != nil {
				cbErr = fmt.Errorf("event record %d: %w", r.Seq, err)
				return false
			}
			next = r.Seq + 1
			return len(out) < limit
		})
	})
	if err == nil {
		err = errors.Join(serr, cbErr)
	}
	if err != nil {
		return nil, from, fmt.Errorf("events %s partition %d: %w", t.name, idx, err)
	}
	return out, next, nil
}

// History returns the retained state events that concern offset seq of
// partition idx, oldest first: its deliveries (with their counts and the
// owner each went to), nacks, lease expiries and releases, dead-lettering,
// settling (and how), and purges that covered it. Like Events it sees
// only the recent events. It scans the partition's event log on its actor
// (about two Options.SnapshotEvery windows of events), bounded by ctx.
func (t *Topic) History(ctx context.Context, idx Partition, seq Seq) ([]StateEvent, error) {
	var out []StateEvent
	var serr, cbErr error
	err := t.onActor(ctx, idx, func(p *partition) {
		first, last := p.events.Bounds()
		if first > last {
			return
		}
		for at := first; at <= last && cbErr == nil && serr == nil; {
			was := at
			serr = p.events.Scan(at, browseMaxBytes, func(r seglog.Record) bool {
				tm := time.Unix(0, r.Time)
				if err := decodeEvents(r.Data, func(e event) {
					if (e.seq == seq && e.kind != evInit) || (e.kind == evPurge && e.seq > seq) {
						out = append(out, stateEvent(r.Seq, tm, e))
					}
				}); err != nil {
					cbErr = fmt.Errorf("event record %d: %w", r.Seq, err)
					return false
				}
				at = r.Seq + 1
				return true
			})
			if at == was {
				break
			}
		}
	})
	if err == nil {
		err = errors.Join(serr, cbErr)
	}
	if err != nil {
		return nil, fmt.Errorf("history %s partition %d offset %d: %w", t.name, idx, seq, err)
	}
	return out, nil
}
