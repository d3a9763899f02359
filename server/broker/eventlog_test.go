package broker

import (
	"errors"
	"testing"

	"github.com/fibrilmq/fibril/server/seglog"
)

// appendStore is an event log for eventWriter's tests: Append numbers the
// records from next and keeps copies of their bytes, or fails with err.
type appendStore struct {
	seglog.Store
	next Seq
	err  error
	got  [][]byte
	meta [][]byte
}

func (s *appendStore) Append(es []seglog.Entry) (Seq, error) {
	if s.err != nil {
		return 0, s.err
	}
	first := s.next
	for _, e := range es {
		s.got = append(s.got, append([]byte(nil), e.Data...))
		s.meta = append(s.meta, e.Meta)
		s.next++
	}
	return first, nil
}

// TestEventWriter: a round's events are written as records of about one
// chunk, each with the round's meta; once written they leave the sink and
// count toward the next snapshot; refused, they stay for the next round's
// append unless they pass the bound, when they are dropped and counted.
func TestEventWriter(t *testing.T) {
	log := &appendStore{next: 5}
	var w eventWriter
	w.sink.chunk = 16
	g := &groupState{id: 3, ev: &w.sink}
	if w.pending() {
		t.Fatal("an empty sink is pending")
	}
	for seq := Seq(1); seq <= 10; seq++ {
		g.emit(evDeliver, seq, 1)
	}
	first, entries, err := w.append(log, []byte("m"), 1)
	if err != nil || first != 5 {
		t.Fatalf("append: %d, %v", first, err)
	}
	if len(entries) < 2 {
		t.Fatalf("10 events in %d record(s), want them cut at the 16-byte chunk", len(entries))
	}
	var events int
	for i, b := range log.got {
		if string(log.meta[i]) != "m" {
			t.Fatalf("record %d meta %q", i, log.meta[i])
		}
		if err := decodeEvents(b, func(event) { events++ }); err != nil {
			t.Fatal(err)
		}
	}
	if events != 10 {
		t.Fatalf("records hold %d events, want 10", events)
	}
	if last := w.written(first); last != first+Seq(len(log.got))-1 || w.last != last {
		t.Fatalf("written: last %d, want %d", last, first+Seq(len(log.got))-1)
	}
	if w.pending() || w.unsnapped != 10 {
		t.Fatalf("after written: pending %v, unsnapped %d", w.pending(), w.unsnapped)
	}
	if !w.snapshotDue(10) || w.snapshotDue(11) {
		t.Fatal("snapshotDue does not count the events written")
	}

	log.err = errors.New("disk full")
	g.emit(evSettle, 1, settleAck)
	if _, _, err := w.append(log, nil, 2); err == nil {
		t.Fatal("the store's error was lost")
	}
	if n := w.refused(1 << 20); n != 0 || !w.pending() {
		t.Fatalf("refused under the bound: dropped %d, pending %v", n, w.pending())
	}
	log.err = nil
	g.emit(evSettle, 2, settleAck)
	nrec := len(log.got)
	first, _, err = w.append(log, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	w.written(first)
	events = 0
	for _, b := range log.got[nrec:] {
		decodeEvents(b, func(event) { events++ })
	}
	if events != 2 || w.unsnapped != 12 {
		t.Fatalf("the refused round's event and the next one's: wrote %d events, unsnapped %d", events, w.unsnapped)
	}

	log.err = errors.New("disk full")
	for seq := Seq(1); seq <= 8; seq++ {
		g.emit(evSettle, seq, settleAck)
	}
	w.append(log, nil, 4)
	if n := w.refused(8); n != 8 || w.pending() || w.unsnapped != 20 {
		t.Fatalf("refused past the bound: dropped %d (want 8), pending %v, unsnapped %d (want 20)", n, w.pending(), w.unsnapped)
	}
	seq, prev := w.beginSnapshot()
	if seq != w.last || prev != 0 || w.unsnapped != 0 {
		t.Fatalf("beginSnapshot: %d, %d, unsnapped %d", seq, prev, w.unsnapped)
	}
}
