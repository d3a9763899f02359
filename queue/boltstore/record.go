package boltstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/fibrilmq/fibril/server/seglog"
)

// A record's value: header CRC-32C (4) | data CRC-32 IEEE (4) | time (8) |
// meta length (2) | meta | data. The header CRC covers the 8-byte key
// (the sequence number) and bytes 4 up to the end of meta.
const headerSize = 4 + 4 + 8 + 2

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// key returns seq as a record key: 8 bytes big-endian, so keys sort as
// sequence numbers do.
func key(seq seglog.Seq) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], uint64(seq))
	return k[:]
}

// keySeq returns the sequence number of a record key, ok false for any
// other key (the floor key).
func keySeq(k []byte) (seglog.Seq, bool) {
	if len(k) != 8 {
		return 0, false
	}
	return seglog.Seq(binary.BigEndian.Uint64(k)), true
}

// valueSize is the encoded size of e.
func valueSize(e *seglog.Entry) int { return headerSize + len(e.Meta) + len(e.Data) }

// appendValue appends e's value, for sequence number seq, to buf.
func appendValue(buf []byte, seq seglog.Seq, e *seglog.Entry, now int64) []byte {
	start := len(buf)
	crc := e.CRC
	if crc == 0 {
		crc = crc32.ChecksumIEEE(e.Data)
	}
	ts := e.Time
	if ts == 0 {
		ts = now
	}
	buf = append(buf, 0, 0, 0, 0)
	buf = binary.BigEndian.AppendUint32(buf, crc)
	buf = binary.BigEndian.AppendUint64(buf, uint64(ts))
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(e.Meta)))
	buf = append(buf, e.Meta...)
	h := crc32.Update(0, castagnoli, key(seq))
	h = crc32.Update(h, castagnoli, buf[start+4:])
	binary.BigEndian.PutUint32(buf[start:], h)
	return append(buf, e.Data...)
}

// decode checks v, the value stored under seq, and returns its record,
// whose Meta and Data point into v. The error says what check failed.
func decode(seq seglog.Seq, v []byte) (seglog.Record, error) {
	if len(v) < headerSize {
		return seglog.Record{}, fmt.Errorf("value of %d bytes, shorter than a header", len(v))
	}
	m := int(binary.BigEndian.Uint16(v[16:]))
	if headerSize+m > len(v) {
		return seglog.Record{}, fmt.Errorf("meta of %d bytes past the value's %d", m, len(v))
	}
	h := crc32.Update(0, castagnoli, key(seq))
	h = crc32.Update(h, castagnoli, v[4:headerSize+m])
	if want := binary.BigEndian.Uint32(v); h != want {
		return seglog.Record{}, fmt.Errorf("header checksum %08x, stored %08x", h, want)
	}
	r := seglog.Record{
		Seq:  seq,
		Time: int64(binary.BigEndian.Uint64(v[8:])),
		CRC:  binary.BigEndian.Uint32(v[4:]),
		Meta: v[headerSize : headerSize+m : headerSize+m],
		Data: v[headerSize+m:],
	}
	if m == 0 {
		r.Meta = nil
	}
	if got := crc32.ChecksumIEEE(r.Data); got != r.CRC {
		return seglog.Record{}, fmt.Errorf("data checksum %08x, stored %08x", got, r.CRC)
	}
	return r, nil
}
