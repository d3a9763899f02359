package broker

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
)

// Snapshot file layout: "FBS2", the event log sequence it covers (uvarint),
// the number of groups, then per group: id, next, frontier, span count,
// spans (lo, hi), pending count, pending (seq, attempts, state, reason),
// and its counters (delivered, redelivered, acked, nacked, rejected,
// dead-lettered, expired); finally the CRC-32 (IEEE) of everything before
// it, 4 bytes little endian. "FBS1" snapshots (before the counters) are
// read with the counters at zero. "FBS3" (written only by a replicated
// partition with a lease to keep, so that older versions still read the
// others) adds state 2: leased, its deadline (unix ns) and the principal
// it is leased to (uvarints) after the reason, so a new leader keeps the
// leases (restored).
const (
	snapMagic   = "FBS2"
	snapMagicV1 = "FBS1"
	snapMagicV3 = "FBS3"
)

const snapName = "state.snap"

// encodeSnapshot is the snapshot file of groups as of event eventSeq.
func encodeSnapshot(eventSeq Seq, groups []*groupState) []byte {
	return captureSnapshot(eventSeq, groups).encode()
}

// snapState is what a snapshot holds, copied out of the groups: the
// actor captures it (a copy of each pending entry, no sorting, no
// encoding) and a background goroutine encodes it, so a partition with
// many leased or delayed offsets does not stall its rounds (250,000
// delayed offsets took the actor ~100 ms to sort and encode).
type snapState struct {
	eventSeq Seq
	v3       bool // some group keeps leases: write FBS3
	groups   []snapCapture
}

// snapCapture is one group's state as captured.
type snapCapture struct {
	id            GroupID
	next          Seq
	frontier      Seq
	spans         []span
	durableLeases bool
	pending       []snapPending
	cnt           GroupCounters
}

// snapPending is one pending offset as captured.
type snapPending struct {
	seq      Seq
	attempts uint32
	state    offState
	reason   uint8
	deadline int64
	holder   Principal
}

// captureSnapshot copies what a snapshot of groups holds (actor only).
func captureSnapshot(eventSeq Seq, groups []*groupState) *snapState {
	st := &snapState{eventSeq: eventSeq, groups: make([]snapCapture, 0, len(groups))}
	for _, g := range groups {
		if g.durableLeases && g.nInflight > 0 {
			st.v3 = true
		}
		c := snapCapture{id: g.id, next: g.next, frontier: g.acks.frontier, spans: slices.Clone(g.acks.spans),
			durableLeases: g.durableLeases, pending: make([]snapPending, 0, len(g.pending)), cnt: g.cnt}
		for s, p := range g.pending {
			c.pending = append(c.pending, snapPending{seq: s, attempts: p.attempts, state: p.state, reason: p.reason, deadline: p.deadline, holder: p.holder})
		}
		st.groups = append(st.groups, c)
	}
	return st
}

// encode writes the snapshot file's bytes (any goroutine: st is its own).
func (st *snapState) encode() []byte {
	magic := snapMagic
	if st.v3 {
		magic = snapMagicV3
	}
	b := []byte(magic)
	b = binary.AppendUvarint(b, uint64(st.eventSeq))
	b = binary.AppendUvarint(b, uint64(len(st.groups)))
	for i := range st.groups {
		g := &st.groups[i]
		b = binary.AppendUvarint(b, uint64(g.id))
		b = binary.AppendUvarint(b, uint64(g.next))
		b = binary.AppendUvarint(b, uint64(g.frontier))
		b = binary.AppendUvarint(b, uint64(len(g.spans)))
		for _, s := range g.spans {
			b = binary.AppendUvarint(b, uint64(s.lo))
			b = binary.AppendUvarint(b, uint64(s.hi))
		}
		slices.SortFunc(g.pending, func(x, y snapPending) int { return cmp.Compare(x.seq, y.seq) })
		b = binary.AppendUvarint(b, uint64(len(g.pending)))
		for _, p := range g.pending {
			st := byte(0)
			leased := magic == snapMagicV3 && g.durableLeases && p.state == stInflight && p.deadline > 0
			switch {
			case p.state == stDeadLettering:
				st = 1
			case leased:
				st = 2
			}
			b = binary.AppendUvarint(b, uint64(p.seq))
			b = binary.AppendUvarint(b, uint64(p.attempts))
			b = append(b, st, p.reason)
			if leased {
				b = binary.AppendUvarint(b, uint64(p.deadline))
				b = binary.AppendUvarint(b, uint64(p.holder))
			}
		}
		c := &g.cnt
		for _, v := range [...]uint64{c.Delivered, c.Redelivered, c.Acked, c.Nacked, c.Rejected, c.DeadLettered, c.Expired} {
			b = binary.AppendUvarint(b, v)
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// snapGroup is one group's state as read from a snapshot.
type snapGroup struct {
	id       GroupID
	next     Seq
	frontier Seq
	spans    []span
	pending  map[Seq]pendingOff
	cnt      GroupCounters
}

func decodeSnapshot(b []byte) (eventSeq Seq, groups []snapGroup, err error) {
	var magic string
	if len(b) >= len(snapMagic)+4 {
		magic = string(b[:len(snapMagic)])
	}
	if magic != snapMagic && magic != snapMagicV1 && magic != snapMagicV3 {
		return 0, nil, fmt.Errorf("%w: snapshot header", ErrCorruptState)
	}
	counters, leases := magic != snapMagicV1, magic == snapMagicV3
	body := b[:len(b)-4]
	if crc32.ChecksumIEEE(body) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return 0, nil, fmt.Errorf("%w: snapshot checksum", ErrCorruptState)
	}
	r := body[len(snapMagic):]
	bad := false
	u := func() uint64 {
		x, n := binary.Uvarint(r)
		if n <= 0 {
			bad = true
			return 0
		}
		r = r[n:]
		return x
	}
	eventSeq = Seq(u())
	ng := u()
	for i := uint64(0); i < ng && !bad; i++ {
		g := snapGroup{id: GroupID(u()), next: Seq(u()), frontier: Seq(u()), pending: map[Seq]pendingOff{}}
		ns := u()
		for j := uint64(0); j < ns && !bad; j++ {
			g.spans = append(g.spans, span{Seq(u()), Seq(u())})
		}
		np := u()
		for j := uint64(0); j < np && !bad; j++ {
			s, a := Seq(u()), uint32(u())
			if len(r) < 2 {
				bad = true
				break
			}
			p := pendingOff{attempts: a, reason: r[1]}
			st := r[0]
			r = r[2:]
			switch {
			case st == 1:
				p.state = stDeadLettering
			case st == 2 && leases:
				p.deadline, p.holder = int64(u()), Principal(u()) // leased: restored keeps it
			case st != 0:
				bad = true
			}
			g.pending[s] = p
		}
		if counters {
			c := &g.cnt
			for _, v := range [...]*uint64{&c.Delivered, &c.Redelivered, &c.Acked, &c.Nacked, &c.Rejected, &c.DeadLettered, &c.Expired} {
				*v = u()
			}
		}
		groups = append(groups, g)
	}
	if bad || len(r) != 0 {
		return 0, nil, fmt.Errorf("%w: snapshot body", ErrCorruptState)
	}
	return eventSeq, groups, nil
}

// writeFileAtomic writes data to dir/name through a temp file, fsyncs it,
// renames it into place and fsyncs the directory.
func writeFileAtomic(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("rename %s: %w", name, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir of %s: %w", name, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir of %s: %w", name, err)
	}
	return nil
}
