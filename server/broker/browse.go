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
	// Kind is "deliver" (Arg: the delivery count), "settle" (acked, or its
	// dead-letter copy is durable), "dead_letter" (Arg: 1 max_deliveries,
	// 2 rejected), "init" (group created, Offset: where it starts) or
	// "purge" (everything below Offset settled; Group 0: the partition).
	Kind   string  `json:"kind"`
	Group  GroupID `json:"group"`
	Offset Seq     `json:"offset"`
	Arg    uint64  `json:"arg"`
}

var eventKindNames = [...]string{evDeliver: "deliver", evSettle: "settle", evDeadLetter: "dead_letter", evInit: "init", evPurge: "purge"}

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
		at = p.firstYoungerThan(tm.UnixNano(), max(p.first, p.purgeFloor))
	})
	if err != nil {
		return 0, fmt.Errorf("seq at %s partition %d: %w", t.name, idx, err)
	}
	return at, nil
}

// Events returns the consumer-state events of partition idx from event
// record from on, whole records until at least limit events, and the record
// to read from next. Events covered by the last snapshot are gone (the log
// is truncated after each snapshot), so the history is recent only. It
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
			if err := decodeEvents(r.Data, func(kind byte, g GroupID, seq Seq, arg uint64) {
				out = append(out, StateEvent{Record: r.Seq, Time: tm, Kind: eventKindNames[kind], Group: g, Offset: seq, Arg: arg})
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
// partition idx, oldest first: its deliveries (with their counts),
// dead-lettering, settling, and purges that covered it. Like Events it sees
// only what followed the last snapshot. It scans the partition's event log
// on its actor (at most Options.SnapshotEvery events), bounded by ctx.
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
				if err := decodeEvents(r.Data, func(kind byte, g GroupID, off Seq, arg uint64) {
					if (off == seq && kind != evInit) || (kind == evPurge && off > seq) {
						out = append(out, StateEvent{Record: r.Seq, Time: tm, Kind: eventKindNames[kind], Group: g, Offset: off, Arg: arg})
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
