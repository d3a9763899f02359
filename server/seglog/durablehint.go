package seglog

import (
	"encoding/binary"
	"hash/crc32"
	"sync"
)

// The durable-point hint.
//
// After every fsync that raises the durable point, the log writes that
// point into its LOCK file (16 bytes at offset 0: magic, sequence number,
// CRC-32), with pwrite and no fsync of its own: the kernel writes it back
// within seconds, or the next Open finds an older value, or none (a torn
// or missing hint reads as 0). It is written only after the fsync it
// describes returned, so whatever value Open reads, every record up to it
// was durable. Recovery uses it with the hints in record headers (record.go)
// to tell damage from a torn write in the last segment: a damaged or
// missing record at or below it was confirmed, so that is corruption
// (Open fails) rather than a tail to cut.
//
// Why the LOCK file: it is open for the whole life of the log anyway, so
// the hint costs one pwrite per fsync and no descriptor.

const (
	hintMagic = "FDH1"
	hintSize  = 16
)

// durableHint is the log's writer of the hint.
type durableHint struct {
	mu   sync.Mutex
	f    File // the LOCK file; nil once released
	last Seq  // highest value written
}

func encodeDurableHint(seq Seq) []byte {
	b := make([]byte, hintSize)
	copy(b, hintMagic)
	binary.LittleEndian.PutUint64(b[4:], uint64(seq))
	binary.LittleEndian.PutUint32(b[12:], crc32.ChecksumIEEE(b[:12]))
	return b
}

// decodeDurableHint returns the hint in b, 0 when there is none or it is
// damaged.
func decodeDurableHint(b []byte) Seq {
	if len(b) < hintSize || string(b[:4]) != hintMagic || crc32.ChecksumIEEE(b[:12]) != binary.LittleEndian.Uint32(b[12:]) {
		return 0
	}
	return Seq(binary.LittleEndian.Uint64(b[4:]))
}

// readHint returns the hint stored in f (the LOCK file), 0 if none.
func readHint(f File) Seq {
	b := make([]byte, hintSize)
	if n, _ := f.ReadAt(b, 0); n < hintSize {
		return 0
	}
	return decodeDurableHint(b)
}

// note records that everything up to seq is durable. Best effort: a lost
// hint only weakens the next recovery's damage check back to what the
// record hints say.
func (h *durableHint) note(seq Seq) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil || seq <= h.last {
		return
	}
	if _, err := h.f.WriteAt(encodeDurableHint(seq), 0); err == nil {
		h.last = seq
	}
}

// release stops the writes (before the file is closed).
func (h *durableHint) release() {
	h.mu.Lock()
	h.f = nil
	h.mu.Unlock()
}
