package replog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/fibrilmq/fibril/server/seglog"
)

// The fetch server: another replica of the group that restores a
// snapshot past its local logs asks this one for its logs and state
// files (restore.go); the group routes the request here
// (cluster.Group.ServeFetch) and the stream back.
//
// Request: "FRF1", the snapshot's index (uvarint). Stream: "FRS1", the
// index this replica applied (uvarint); then for the data log, then the
// event log, the first seq held (uvarint) and batches of records, each
// a count (uvarint, 0 ends the log) and that many records encoded as in
// a record entry (time, data CRC, meta, data; entry.go), from the first
// seq on, without a gap, up to the last seq held when the log's turn
// came; then the state files: a count, and per file its name's length,
// the name, its size (uvarints) and its bytes; last the CRC-32 (IEEE)
// of everything before it, 4 bytes little endian. A record's data CRC
// is checked as it is read here (seglog) and again on arrival.
const (
	fetchMagic  = "FRF1"
	streamMagic = "FRS1"
	// batchBytes and batchRecords bound one batch of records: what the
	// server copies out of a log at a time (under cutMu) and what the
	// receiver holds before it appends.
	batchBytes   = 1 << 20
	batchRecords = 1024
	// maxStateFiles bounds the state files a stream carries.
	maxStateFiles = 64
)

func encodeFetch(index uint64) []byte {
	return binary.AppendUvarint([]byte(fetchMagic), index)
}

func decodeFetch(b []byte) (uint64, error) {
	if len(b) < len(fetchMagic) || string(b[:len(fetchMagic)]) != fetchMagic {
		return 0, fmt.Errorf("%w: fetch request header", ErrCorrupt)
	}
	x, n := binary.Uvarint(b[len(fetchMagic):])
	if n <= 0 || len(fetchMagic)+n != len(b) {
		return 0, fmt.Errorf("%w: fetch request body", ErrCorrupt)
	}
	return x, nil
}

// crcWriter checksums what it writes.
type crcWriter struct {
	w   *bufio.Writer
	crc hash.Hash32
	err error
}

func (c *crcWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	c.crc.Write(b)
	_, c.err = c.w.Write(b)
}

func (c *crcWriter) uvarint(x uint64) { c.write(binary.AppendUvarint(nil, x)) }

// serveFetch answers a fetch from replica from (see the layout above).
// It serves one at a time, and only a snapshot this replica has applied
// past; it fails when a log's front moves past the seq it was copying.
func (p *Pair) serveFetch(from uint64, req []byte, w io.Writer) error {
	index, err := decodeFetch(req)
	if err != nil {
		return err
	}
	if seen := p.seen.Load(); seen < index {
		return fmt.Errorf("replog %s: replica %d applied %d, before snapshot %d", p.dir, p.id, seen, index)
	}
	if !p.sending.CompareAndSwap(false, true) {
		return fmt.Errorf("replog %s: replica %d is sending its logs to another replica; retry", p.dir, p.id)
	}
	defer p.sending.Store(false)
	cw := &crcWriter{w: bufio.NewWriterSize(w, 64<<10), crc: crc32.NewIEEE()}
	cw.write([]byte(streamMagic))
	cw.uvarint(p.seen.Load())
	for _, l := range [...]*Log{p.data, p.events} {
		if err := l.sendRecords(cw); err != nil {
			return fmt.Errorf("replog %s: fetch for replica %d: %w", p.dir, from, err)
		}
	}
	if err := p.sendStates(cw); err != nil {
		return fmt.Errorf("replog %s: fetch for replica %d: %w", p.dir, from, err)
	}
	if cw.err == nil {
		_, cw.err = cw.w.Write(binary.LittleEndian.AppendUint32(nil, cw.crc.Sum32()))
	}
	if cw.err == nil {
		cw.err = cw.w.Flush()
	}
	if cw.err != nil {
		return fmt.Errorf("replog %s: fetch for replica %d: %w", p.dir, from, cw.err)
	}
	return nil
}

// sendRecords writes the log's records, first to last as they are when
// it starts, one batch at a time.
func (l *Log) sendRecords(cw *crcWriter) error {
	p := l.p
	p.cutMu.Lock()
	first, end := l.loc().Bounds()
	p.cutMu.Unlock()
	cw.uvarint(uint64(first))
	buf := make([]byte, 0, batchBytes+4096)
	for next := first; next <= end && cw.err == nil; {
		buf = buf[:0]
		n, gap := 0, false
		p.cutMu.Lock()
		err := l.loc().Scan(next, batchBytes, func(r seglog.Record) bool {
			if r.Seq > end {
				return false
			}
			if r.Seq != next {
				gap = true
				return false
			}
			buf = binary.LittleEndian.AppendUint64(buf, uint64(r.Time))
			buf = binary.LittleEndian.AppendUint32(buf, r.CRC)
			buf = binary.AppendUvarint(buf, uint64(len(r.Meta)))
			buf = append(buf, r.Meta...)
			buf = binary.AppendUvarint(buf, uint64(len(r.Data)))
			buf = append(buf, r.Data...)
			next++
			n++
			return n < batchRecords
		})
		p.cutMu.Unlock()
		switch {
		case err != nil:
			return fmt.Errorf("read %s at %d: %w", l.loc().Dir(), next, err)
		case gap:
			return fmt.Errorf("%s: the front moved past seq %d while it was sent; retry", l.loc().Dir(), next)
		case n == 0:
			return fmt.Errorf("%s: no record at %d, the log held records to %d", l.loc().Dir(), next, end)
		}
		cw.uvarint(uint64(n))
		cw.write(buf)
	}
	cw.uvarint(0)
	return nil
}

// stateFiles lists the state files in dir (WriteState's: every plain
// file that is not replog's own or a temporary one).
func stateFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list state files in %s: %w", dir, err)
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && checkStateName(e.Name()) == nil && !strings.Contains(e.Name(), ".tmp") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// sendStates writes the state files. A state file is only ever replaced
// (WriteState), never removed, so this replica, which applied at least
// as far as the one fetching, holds every name that one does.
func (p *Pair) sendStates(cw *crcWriter) error {
	names, err := stateFiles(p.dir)
	if err != nil {
		return err
	}
	if len(names) > maxStateFiles {
		return fmt.Errorf("%d state files in %s, a fetch carries %d", len(names), p.dir, maxStateFiles)
	}
	cw.uvarint(uint64(len(names)))
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(p.dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("state file %s went while it was sent; retry", name)
		}
		if err != nil {
			return fmt.Errorf("read state file: %w", err)
		}
		cw.uvarint(uint64(len(name)))
		cw.write([]byte(name))
		cw.uvarint(uint64(len(b)))
		cw.write(b)
	}
	return nil
}
