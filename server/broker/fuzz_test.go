package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/fibrilmq/fibril/server/seglog"
)

// FuzzDecodeEvents: any bytes decode to events or ErrCorruptState, never a
// panic; what encodes decodes back.
func FuzzDecodeEvents(f *testing.F) {
	f.Add(appendEvent(appendEvent(nil, event{kind: evDeliver, group: 3, seq: 17, arg: 2}), event{kind: evSettle, group: 3, seq: 17}))
	f.Add(appendEvent(appendEvent(nil, event{kind: evDeliver, group: 3, seq: 17, arg: 2, owner: 9}), event{kind: evNack, group: 3, seq: 17, arg: 5e9, owner: 9}))
	f.Add([]byte{evDeliver | evHasOwner, 1, 2, 3})
	f.Add([]byte{evInit, 0x80})
	f.Add([]byte{9})
	f.Fuzz(func(t *testing.T, b []byte) {
		var again []byte
		err := decodeEvents(b, func(e event) {
			again = appendEvent(again, e)
		})
		if err != nil {
			if !errors.Is(err, ErrCorruptState) {
				t.Fatalf("error %v does not wrap ErrCorruptState", err)
			}
			return
		}
		n := 0
		if err := decodeEvents(again, func(event) { n++ }); err != nil {
			t.Fatalf("re-encoded events do not decode: %v", err)
		}
	})
}

// FuzzDecodeSnapshot: damaged snapshots are refused with ErrCorruptState,
// never a panic.
func FuzzDecodeSnapshot(f *testing.F) {
	g := newGroupState(4, 1000, 5, 1)
	for s := Seq(1); s <= 5; s++ {
		g.deliver(s, 0, 0, 0, nil)
	}
	g.settle(2, 1, Ack(), 0)
	g.settle(3, 1, Reject(), 0)
	good := encodeSnapshot(9, []*groupState{g})
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add([]byte("FBS1"))
	f.Add([]byte("FBS2"))
	g.durableLeases = true
	f.Add(encodeSnapshot(9, []*groupState{g}))
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, gs, err := decodeSnapshot(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptState) {
				t.Fatalf("error %v does not wrap ErrCorruptState", err)
			}
			return
		}
		_ = seq
		for _, sg := range gs {
			if sg.pending == nil {
				t.Fatal("nil pending map")
			}
		}
	})
}

func TestSnapshotRoundTrip(t *testing.T) {
	g := newGroupState(4, 1000, 5, 1)
	for s := Seq(1); s <= 6; s++ {
		g.deliver(s, 0, 0, 0, nil)
	}
	g.settle(2, 1, Ack(), 0)
	g.settle(4, 1, Ack(), 0)
	g.settle(3, 1, Reject(), 0)
	seq, gs, err := decodeSnapshot(encodeSnapshot(9, []*groupState{g}))
	if err != nil || seq != 9 || len(gs) != 1 {
		t.Fatalf("decode: %v %d %d", err, seq, len(gs))
	}
	sg := gs[0]
	if sg.cnt != g.cnt || sg.cnt.Delivered != 6 || sg.cnt.Rejected != 1 {
		t.Fatalf("counters %+v, want %+v", sg.cnt, g.cnt)
	}
	if sg.id != 4 || sg.next != 7 || sg.frontier != 1 || len(sg.spans) != 2 || sg.spans[0] != (span{2, 3}) || sg.spans[1] != (span{4, 5}) {
		t.Fatalf("decoded %+v", sg)
	}
	if p := sg.pending[3]; p.state != stDeadLettering || p.reason != reasonRejected || p.attempts != 1 {
		t.Fatalf("pending 3: %+v", p)
	}
	if len(sg.pending) != 4 { // 1, 3, 5, 6
		t.Fatalf("pending %v", sg.pending)
	}
	b := encodeSnapshot(9, []*groupState{g})
	b[6] ^= 1
	if _, _, err := decodeSnapshot(b); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("flipped bit: %v", err)
	}
}

// TestSnapshotKeepsLeasesOfReplicatedGroups: a replicated group's
// snapshot (FBS3) carries each lease's deadline, so a new leader keeps
// it (restored); a group that is not replicated writes FBS2 without
// them, as older versions read.
func TestSnapshotKeepsLeasesOfReplicatedGroups(t *testing.T) {
	g := newGroupState(4, 1000, 5, 1)
	for s := Seq(1); s <= 3; s++ {
		g.deliver(s, 100, 0, 7, nil) // leased to principal 7 until 100+1000
	}
	g.settle(2, 1, Ack(), 100)
	if b := encodeSnapshot(9, []*groupState{g}); string(b[:4]) != snapMagic {
		t.Fatalf("a group not replicated wrote %q", b[:4])
	}
	g.durableLeases = true
	b := encodeSnapshot(9, []*groupState{g})
	if string(b[:4]) != snapMagicV3 {
		t.Fatalf("a replicated group with leases wrote %q", b[:4])
	}
	_, gs, err := decodeSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	r := newGroupState(4, 1000, 5, 1)
	r.durableLeases = true
	r.next, r.pending = gs[0].next, gs[0].pending
	r.restored(500)
	if r.nInflight != 2 || r.pending[1].state != stInflight || r.pending[1].deadline != 1100 || r.pending[3].deadline != 1100 || r.pending[1].holder != 7 {
		t.Fatalf("restored at 500: inflight %d, pending %+v", r.nInflight, r.pending)
	}
	late := newGroupState(4, 1000, 5, 1)
	late.durableLeases = true
	late.next, late.pending = gs[0].next, gs[0].pending
	late.restored(2000) // past the deadlines: ready again
	if late.nInflight != 0 || late.pending[1].state != stReady {
		t.Fatalf("restored at 2000: inflight %d, pending %+v", late.nInflight, late.pending)
	}
}

// FuzzDecodeMeta: record meta decodes or fails with ErrCorruptState; what
// encodes decodes back.
func FuzzDecodeMeta(f *testing.F) {
	f.Add(encodeMeta(nil, 12, "orders.eu"), 3, "a.b")
	f.Add([]byte{1, 0}, 0, "")
	f.Fuzz(func(t *testing.T, b []byte, hdr int, subject string) {
		if _, _, err := decodeMeta(b); err != nil && !errors.Is(err, ErrCorruptState) {
			t.Fatalf("error %v does not wrap ErrCorruptState", err)
		}
		if hdr < 0 || hdr > 1<<30 {
			return
		}
		h, s, err := decodeMeta(encodeMeta(nil, hdr, subject))
		if err != nil || h != hdr || s != subject {
			t.Fatalf("round trip (%d, %q) = (%d, %q, %v)", hdr, subject, h, s, err)
		}
		// with a previous subject, equal or not, the result is the same
		for _, prev := range []string{subject, subject + "x", ""} {
			if h, s, err := decodeMetaReuse(encodeMeta(nil, hdr, subject), prev); err != nil || h != hdr || s != subject {
				t.Fatalf("round trip (%d, %q) after %q = (%d, %q, %v)", hdr, subject, prev, h, s, err)
			}
		}
	})
}

// TestDecodeMetaReuseDoesNotAllocate: a delivery whose subject is the
// previous one's costs no string allocation.
func TestDecodeMetaReuseDoesNotAllocate(t *testing.T) {
	meta := encodeMeta(nil, 0, "orders.eu.created")
	prev := "orders.eu.created"
	if n := testing.AllocsPerRun(100, func() {
		if _, s, err := decodeMetaReuse(meta, prev); err != nil || s != prev {
			t.Fatal(s, err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per decode of the previous subject, want 0", n)
	}
}

// FuzzDecodeSideCopy: any bytes decode to a side copy or ErrCorruptState,
// never a panic; what decodes, encoded again, decodes to the same events
// (the bytes may differ: a varint may be written longer than it needs).
func FuzzDecodeSideCopy(f *testing.F) {
	f.Add(encodeSideCopy(nil, 7, []seglog.Entry{{Data: []byte("ab")}, {Data: nil}}))
	f.Add([]byte{sideCopyV1, 1, 1, 0})
	f.Add([]byte{sideCopyV1, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		var first Seq
		var entries []seglog.Entry
		err := decodeSideCopy(b, func(seq Seq, data []byte) {
			if first == 0 {
				first = seq
			}
			entries = append(entries, seglog.Entry{Data: data})
		})
		if err != nil {
			if !errors.Is(err, ErrCorruptState) {
				t.Fatalf("error %v does not wrap ErrCorruptState", err)
			}
			return
		}
		if len(entries) == 0 {
			return // a copy of no events: first is not passed on
		}
		i := 0
		err = decodeSideCopy(encodeSideCopy(nil, first, entries), func(seq Seq, data []byte) {
			if i >= len(entries) || seq != first+Seq(i) || !bytes.Equal(data, entries[i].Data) {
				t.Fatalf("event %d decodes as %d %q after encoding again", i, seq, data)
			}
			i++
		})
		if err != nil || i != len(entries) {
			t.Fatalf("encoded again: %v, %d of %d events", err, i, len(entries))
		}
	})
}

// TestSnapshotV1StillReads: a snapshot from before the counters ("FBS1")
// decodes, with the counters at zero.
func TestSnapshotV1StillReads(t *testing.T) {
	b := []byte("FBS1")
	b = binary.AppendUvarint(b, 9) // event seq
	b = binary.AppendUvarint(b, 1) // one group
	// id 4, next 3, frontier 2, no spans, one pending: seq 2, attempts 2;
	// then its state (1: dead-lettering) and reason bytes.
	for _, v := range []uint64{4, 3, 2, 0, 1, 2, 2} {
		b = binary.AppendUvarint(b, v)
	}
	b = append(b, 1, 0)
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	seq, gs, err := decodeSnapshot(b)
	if err != nil || seq != 9 || len(gs) != 1 || gs[0].id != 4 || len(gs[0].pending) != 1 || gs[0].cnt != (GroupCounters{}) {
		t.Fatalf("decode v1: %v %d %+v", err, seq, gs)
	}
	if p := gs[0].pending[2]; p.attempts != 2 || p.state != stDeadLettering {
		t.Fatalf("pending %+v", p)
	}
}
