package server

import (
	"slices"
	"testing"

	"github.com/fibrilmq/fibril/server/broker"
)

// TestWriteSideWrote steps the write side's accounting alone: three
// ack-on-write deliveries ending at bytes 100, 300 and 600 of the stream,
// all handed to the transport, then the transport reporting what it still
// holds. An ack is settled only once the socket has every byte up to its
// end; no progress for longer than the deadline is stuck; acks left
// waiting ask for the drain poll unless the connection is closing.
func TestWriteSideWrote(t *testing.T) {
	const deadline = 1000
	h := func(seq int) broker.Handle {
		return broker.Handle{Topic: 1, Group: 1, Seq: broker.Seq(seq), Attempt: 1}
	}
	var w writeSide
	for i, end := range []uint64{100, 300, 600} {
		w.taken = end
		w.addWriteAck(h(i + 1))
	}
	steps := []struct {
		held    int   // bytes the transport still holds
		ns      int64 // now
		closing bool
		settle  []broker.Handle
		stuck   bool
		prog    bool
		waiting bool
	}{
		{held: 450, ns: 0, settle: []broker.Handle{h(1)}, prog: true, waiting: true}, // 150 on the socket
		{held: 450, ns: 500, waiting: true},                                          // no progress, within the deadline
		{held: 450, ns: 1501, stuck: true, waiting: true},                            // no progress past it
		{held: 300, ns: 1600, settle: []broker.Handle{h(2)}, prog: true, waiting: true},
		{held: 100, ns: 1700, prog: true, closing: true}, // 500 on the socket: seq 3 still waits, but closing
		{held: 0, ns: 1800, settle: []broker.Handle{h(3)}, prog: true},
		{held: 0, ns: 5000}, // nothing held: never stuck
	}
	for i, st := range steps {
		settle, stuck, prog, waiting := w.wrote(st.held, st.ns, deadline, st.closing)
		if !slices.Equal(settle, st.settle) || stuck != st.stuck || prog != st.prog || waiting != st.waiting {
			t.Errorf("step %d (held %d at %d): settle %v stuck %v progress %v waiting %v, want %v %v %v %v",
				i, st.held, st.ns, settle, stuck, prog, waiting, st.settle, st.stuck, st.prog, st.waiting)
		}
	}
	if len(w.writeAcks) != 0 || w.onSocket != 600 || w.outHigh != 0 {
		t.Errorf("after all: %d acks left, onSocket %d, outHigh %d", len(w.writeAcks), w.onSocket, w.outHigh)
	}
}
