package seglog

import (
	"encoding/binary"
	"hash/crc32"
)

// On-disk record layout (little endian), padded to a multiple of 8 bytes:
//
//	0  uint32 header CRC-32 (IEEE) of bytes 4..32 and the meta bytes
//	4  uint32 data length
//	8  uint64 sequence number
//	16 int64  timestamp (Unix nanoseconds)
//	24 uint16 flags (0; reserved)
//	26 uint16 meta length
//	28 uint32 data CRC-32 (IEEE), the value the wire protocol carries
//	32 meta, then data, then zero padding
//
// Unwritten space in a segment is zero, so a zero header marks the end.
const (
	recHeaderSize = 32
	recAlign      = 8
)

// recHeader is a decoded record header.
type recHeader struct {
	hcrc    uint32
	dataLen uint32
	seq     Seq
	time    int64
	flags   uint16
	metaLen uint16
	dcrc    uint32
}

// recordSize returns the padded on-disk size of a record.
func recordSize(metaLen, dataLen int) int64 {
	n := int64(recHeaderSize + metaLen + dataLen)
	return (n + recAlign - 1) &^ (recAlign - 1)
}

// size returns the padded on-disk size of the record h heads.
func (h recHeader) size() int64 { return recordSize(int(h.metaLen), int(h.dataLen)) }

// appendRecord appends the encoded record to dst.
func appendRecord(dst []byte, seq Seq, ts int64, meta, data []byte, dcrc uint32) []byte {
	if dcrc == 0 {
		dcrc = crc32.ChecksumIEEE(data)
	}
	start := len(dst)
	var h [recHeaderSize]byte
	binary.LittleEndian.PutUint32(h[4:], uint32(len(data)))
	binary.LittleEndian.PutUint64(h[8:], uint64(seq))
	binary.LittleEndian.PutUint64(h[16:], uint64(ts))
	binary.LittleEndian.PutUint16(h[24:], 0)
	binary.LittleEndian.PutUint16(h[26:], uint16(len(meta)))
	binary.LittleEndian.PutUint32(h[28:], dcrc)
	hcrc := crc32.Update(crc32.ChecksumIEEE(h[4:]), crc32.IEEETable, meta)
	binary.LittleEndian.PutUint32(h[0:], hcrc)
	dst = append(dst, h[:]...)
	dst = append(dst, meta...)
	dst = append(dst, data...)
	for pad := int(recordSize(len(meta), len(data))) - (len(dst) - start); pad > 0; pad-- {
		dst = append(dst, 0)
	}
	return dst
}

// parseHeader decodes the header at b[0:32] without checking it.
func parseHeader(b []byte) recHeader {
	return recHeader{
		hcrc:    binary.LittleEndian.Uint32(b[0:]),
		dataLen: binary.LittleEndian.Uint32(b[4:]),
		seq:     Seq(binary.LittleEndian.Uint64(b[8:])),
		time:    int64(binary.LittleEndian.Uint64(b[16:])),
		flags:   binary.LittleEndian.Uint16(b[24:]),
		metaLen: binary.LittleEndian.Uint16(b[26:]),
		dcrc:    binary.LittleEndian.Uint32(b[28:]),
	}
}

// recStatus is the outcome of checking the record at an offset.
type recStatus uint8

const (
	recOK       recStatus = iota
	recZero               // an all-zero header: the end of the written data
	recBadHdr             // header checksum or framing fails
	recBadData            // header fine, data checksum fails
	recOutOfMap           // the record would run past the end of the segment
)

// checkRecord verifies the record at buf[off:], where buf is the whole
// segment. It returns the header and the status; the record is usable only
// with recOK.
func checkRecord(buf []byte, off int64) (recHeader, recStatus) {
	return checkRecordData(buf, off, true)
}

// checkRecordData is checkRecord; with data false it checks the header and
// the framing only (enough to step over a record on the way to another).
func checkRecordData(buf []byte, off int64, data bool) (recHeader, recStatus) {
	if off+recHeaderSize > int64(len(buf)) {
		return recHeader{}, recOutOfMap
	}
	hb := buf[off : off+recHeaderSize]
	h := parseHeader(hb)
	if h.hcrc == 0 && h.dataLen == 0 && h.seq == 0 && h.time == 0 && h.flags == 0 && h.metaLen == 0 && h.dcrc == 0 {
		return h, recZero
	}
	metaEnd := off + recHeaderSize + int64(h.metaLen)
	if metaEnd > int64(len(buf)) {
		return h, recBadHdr
	}
	hcrc := crc32.Update(crc32.ChecksumIEEE(hb[4:]), crc32.IEEETable, buf[off+recHeaderSize:metaEnd])
	if hcrc != h.hcrc || h.flags != 0 {
		return h, recBadHdr
	}
	if off+h.size() > int64(len(buf)) {
		return h, recOutOfMap
	}
	if data && crc32.ChecksumIEEE(buf[metaEnd:metaEnd+int64(h.dataLen)]) != h.dcrc {
		return h, recBadData
	}
	return h, recOK
}

// recordAt returns the record whose verified header h sits at buf[off:].
// Meta and Data point into buf.
func recordAt(buf []byte, off int64, h recHeader) Record {
	metaStart := off + recHeaderSize
	dataStart := metaStart + int64(h.metaLen)
	dataEnd := dataStart + int64(h.dataLen)
	return Record{
		Seq:  h.seq,
		Time: h.time,
		Meta: buf[metaStart:dataStart:dataStart],
		Data: buf[dataStart:dataEnd:dataEnd],
		CRC:  h.dcrc,
	}
}

// looksTorn reports whether the damaged range buf[off:off+n] shows the mark
// of an interrupted write rather than of damage: some 512-byte disk
// sector's share of it (at least 8 bytes) is all zero, i.e. never written.
// Unwritten segment space is always zero (the log zeroes any tail it cuts
// and any failed write's leftovers).
func looksTorn(buf []byte, off, n int64) bool {
	const sector = 512
	end := off + n
	if end > int64(len(buf)) {
		end = int64(len(buf))
	}
	for s := off; s < end; {
		next := (s/sector + 1) * sector
		if next > end {
			next = end
		}
		if next-s >= 8 && allZero(buf[s:next]) {
			return true
		}
		s = next
	}
	return false
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
