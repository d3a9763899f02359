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
//	24 uint16 flags: 0, or the durable hint (below), or a side record's
//	          mark and hint (side.go)
//	26 uint16 meta length
//	28 uint32 data CRC-32 (IEEE), the value the wire protocol carries
//	32 meta, then data, then zero padding
//
// Space a segment never held a record in reads as zero, so a zero header
// marks the end; a reused spare (recycle.go) holds its old records
// instead, all numbered below the segment's first sequence number.
//
// The durable hint: with bit 15 set, flags says how far the log's durable
// point was below the record when it was written (the lag, at least 1),
// as a mantissa (bits 0..10) shifted left by an exponent (bits 11..14),
// rounded up, so seq - lag never claims more than was durable. Recovery
// uses it to tell a torn write from damage without relying on zeros: a
// damaged record that no later intact record claims durable was never
// confirmed (see scanSegment). flags 0 (records written before the hint,
// or a lag too large to encode) claims nothing. Versions before the hint
// took any flags but 0 for damage: they cannot open a log written since.
//
// A side record (bit 15 clear, bit 14 set) is not one of the log's
// records: it takes no sequence number of its own (its seq field is the
// number the next record will get) and reads never return it (side.go).
// Its bits 0..13 carry the same hint with a 3-bit exponent (bits 11..13);
// a mantissa of 0 claims nothing. Versions before side records take them
// for damage: they cannot open a log holding one.
const (
	recHeaderSize = 32
	recAlign      = 8
)

const (
	flagHint     = 1 << 15
	flagSide     = 1 << 14
	hintMantBits = 11
	hintMaxExp   = 1<<(15-hintMantBits) - 1
	sideMaxExp   = 1<<(14-hintMantBits) - 1
)

// encodeHint returns the flags of a record numbered seq written while the
// log was durable up to durable (< seq), or 0 when the lag does not fit.
func encodeHint(seq, durable Seq) uint16 {
	if m, e, ok := hintLag(seq, durable, hintMaxExp); ok {
		return uint16(flagHint | e<<hintMantBits | m)
	}
	return 0
}

// encodeSideHint returns the flags of a side record whose seq field is seq
// (the next record's number), written while the log was durable up to
// durable: the side flag, and the hint if it fits.
func encodeSideHint(seq, durable Seq) uint16 {
	if m, e, ok := hintLag(seq, durable, sideMaxExp); ok {
		return uint16(flagSide | e<<hintMantBits | m)
	}
	return flagSide
}

// hintLag encodes seq - durable (at least 1) as a mantissa and an exponent
// up to maxExp, rounded up.
func hintLag(seq, durable Seq, maxExp uint64) (m, e uint64, ok bool) {
	lag := uint64(seq - durable)
	if durable >= seq {
		lag = 1 // cannot happen (a record is written before it is durable); claim the least
	}
	for e := uint64(0); e <= maxExp; e++ {
		m := (lag + 1<<e - 1) >> e // rounded up
		if m < 1<<hintMantBits {
			return m, e, true
		}
	}
	return 0, 0, false
}

// side reports whether h heads a side record.
func (h recHeader) side() bool { return h.flags&(flagHint|flagSide) == flagSide }

// durableBelow returns the sequence number up to which the log was
// durable when the record h heads was written (0: nothing known), and
// whether the record carries a hint at all.
func (h recHeader) durableBelow() (Seq, bool) {
	maxExp := uint64(hintMaxExp)
	switch {
	case h.side():
		maxExp = sideMaxExp
		if h.flags&(1<<hintMantBits-1) == 0 {
			return 0, false
		}
	case h.flags&flagHint == 0:
		return 0, false
	}
	e := uint64(h.flags>>hintMantBits) & maxExp
	lag := uint64(h.flags&(1<<hintMantBits-1)) << e
	if lag >= uint64(h.seq) {
		return 0, true
	}
	return h.seq - Seq(lag), true
}

// validFlags: 0, a hint or a side record's flags; other bit patterns are
// damage.
func validFlags(f uint16) bool { return f == 0 || f&flagHint != 0 || f&flagSide != 0 }

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

// appendRecord appends the encoded record to dst; durable is the log's
// durable point as the record is written (for the hint in its flags).
func appendRecord(dst []byte, seq, durable Seq, ts int64, meta, data []byte, dcrc uint32) []byte {
	return appendRecordFlags(dst, seq, encodeHint(seq, durable), ts, meta, data, dcrc)
}

// appendRecordFlags is appendRecord with the flags given.
func appendRecordFlags(dst []byte, seq Seq, flags uint16, ts int64, meta, data []byte, dcrc uint32) []byte {
	if dcrc == 0 {
		dcrc = crc32.ChecksumIEEE(data)
	}
	start := len(dst)
	// The header is encoded in place: a local array passed to crc32 would
	// escape to the heap (one allocation per record).
	dst = append(dst, make([]byte, recHeaderSize)...)
	h := dst[start : start+recHeaderSize]
	binary.LittleEndian.PutUint32(h[4:], uint32(len(data)))
	binary.LittleEndian.PutUint64(h[8:], uint64(seq))
	binary.LittleEndian.PutUint64(h[16:], uint64(ts))
	binary.LittleEndian.PutUint16(h[24:], flags)
	binary.LittleEndian.PutUint16(h[26:], uint16(len(meta)))
	binary.LittleEndian.PutUint32(h[28:], dcrc)
	hcrc := crc32.Update(crc32.ChecksumIEEE(h[4:]), crc32.IEEETable, meta)
	binary.LittleEndian.PutUint32(h[0:], hcrc)
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
	if !validFlags(h.flags) {
		return h, recBadHdr
	}
	metaEnd := off + recHeaderSize + int64(h.metaLen)
	if metaEnd > int64(len(buf)) {
		return h, recBadHdr
	}
	hcrc := crc32.Update(crc32.ChecksumIEEE(hb[4:]), crc32.IEEETable, buf[off+recHeaderSize:metaEnd])
	if hcrc != h.hcrc || !validFlags(h.flags) {
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
// It is the test for records without a durable hint (written before
// hints), which only ever went into space that was zero.
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
