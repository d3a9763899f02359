package replog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/fibrilmq/fibril/server/seglog"
)

// Raft entry layout: a tag byte, the proposer's replica id and its epoch
// (uvarints; which serving epoch of which replica proposed it), then the
// tag's body:
//
//   - tagData, tagEvents: the first record's seq and the record count
//     (uvarints), then per record its time (8 bytes little endian), data
//     CRC (4 bytes), meta length (uvarint), meta, data length (uvarint),
//     data.
//   - tagTruncData, tagTruncEvents: the seq to truncate below (uvarint).
//   - tagState: the name's length (uvarint), the name, the file's bytes.
//   - tagBarrier: nothing (a new serving epoch starts once it is applied).
const (
	tagData byte = 1 + iota
	tagEvents
	tagTruncData
	tagTruncEvents
	tagState
	tagBarrier
)

// entry is a decoded raft entry. recs borrow the entry's bytes.
type entry struct {
	tag      byte
	proposer uint64
	epoch    uint64
	first    seglog.Seq // tagData, tagEvents: the first record's seq; tagTrunc*: the cut
	recs     []seglog.Record
	name     string // tagState
	state    []byte // tagState
}

// header starts an entry of tag proposed by proposer in epoch.
func header(b []byte, tag byte, proposer, epoch uint64) []byte {
	b = append(b, tag)
	b = binary.AppendUvarint(b, proposer)
	return binary.AppendUvarint(b, epoch)
}

// recordsSize is what encodeRecords adds for one record at most.
func recordSize(e *seglog.Entry) int {
	return 8 + 4 + 2*binary.MaxVarintLen64 + len(e.Meta) + len(e.Data)
}

// appendRecords appends the body of a tagData or tagEvents entry, each
// record stamped (stamp) so that every replica stores the same.
func appendRecords(b []byte, first seglog.Seq, ents []seglog.Entry, now int64) []byte {
	b = binary.AppendUvarint(b, uint64(first))
	b = binary.AppendUvarint(b, uint64(len(ents)))
	for i := range ents {
		e := ents[i] // a copy: the caller's entries stay as they were
		stamp(&e, now)
		b = binary.LittleEndian.AppendUint64(b, uint64(e.Time))
		b = binary.LittleEndian.AppendUint32(b, e.CRC)
		b = binary.AppendUvarint(b, uint64(len(e.Meta)))
		b = append(b, e.Meta...)
		b = binary.AppendUvarint(b, uint64(len(e.Data)))
		b = append(b, e.Data...)
	}
	return b
}

// stamp fills e's time (now, if unset) and CRC (if unset), so that every
// replica stores the same record.
func stamp(e *seglog.Entry, now int64) {
	if e.Time == 0 {
		e.Time = now
	}
	if e.CRC == 0 {
		e.CRC = crc32.ChecksumIEEE(e.Data)
	}
}

// decodeEntry reads an entry; records and state borrow b.
func decodeEntry(b []byte) (entry, error) {
	var e entry
	bad := func(what string) (entry, error) {
		return entry{}, fmt.Errorf("%w: replicated entry: %s", ErrCorrupt, what)
	}
	if len(b) == 0 {
		return bad("empty")
	}
	e.tag, b = b[0], b[1:]
	u := func() (uint64, bool) {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return x, true
	}
	var ok1, ok2 bool
	e.proposer, ok1 = u()
	e.epoch, ok2 = u()
	if !ok1 || !ok2 {
		return bad("header")
	}
	switch e.tag {
	case tagData, tagEvents:
		first, ok1 := u()
		n, ok2 := u()
		if !ok1 || !ok2 || first == 0 || n == 0 || n > uint64(len(b)) {
			return bad("record header")
		}
		e.first = seglog.Seq(first)
		e.recs = make([]seglog.Record, 0, n)
		for i := uint64(0); i < n; i++ {
			if len(b) < 12 {
				return bad("record")
			}
			r := seglog.Record{Seq: e.first + seglog.Seq(i), Time: int64(binary.LittleEndian.Uint64(b)), CRC: binary.LittleEndian.Uint32(b[8:])}
			b = b[12:]
			ml, ok := u()
			if !ok || ml > uint64(len(b)) {
				return bad("record meta")
			}
			r.Meta, b = b[:ml:ml], b[ml:]
			dl, ok := u()
			if !ok || dl > uint64(len(b)) {
				return bad("record data")
			}
			r.Data, b = b[:dl:dl], b[dl:]
			e.recs = append(e.recs, r)
		}
		if len(b) != 0 {
			return bad("trailing bytes")
		}
	case tagTruncData, tagTruncEvents:
		cut, ok := u()
		if !ok || len(b) != 0 {
			return bad("truncation")
		}
		e.first = seglog.Seq(cut)
	case tagState:
		nl, ok := u()
		if !ok || nl == 0 || nl > uint64(len(b)) {
			return bad("state name")
		}
		e.name, e.state = string(b[:nl]), b[nl:]
	case tagBarrier:
		if len(b) != 0 {
			return bad("barrier")
		}
	default:
		return bad(fmt.Sprintf("tag %d", e.tag))
	}
	return e, nil
}
