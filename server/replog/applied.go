package replog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/fibrilmq/fibril/server/seglog"
)

// The applied mark (file "applied"): the raft index the local logs hold
// everything up to, and the seq each log's next applied record gets.
// It is written only after both local logs are fsynced (temp -> fsync ->
// rename -> directory fsync), so it never claims more than the disk
// holds; raft replays the entries after it, which the state machine
// applies again by the same rule (records already present are skipped).
//
// Layout: "FRA2", index, next data seq, next event seq, the index of
// the last state file written, the generation of the local logs
// (uvarints), the CRC-32 (IEEE) of what precedes, 4 bytes little
// endian; "FRA1" is the same without the generation (0). The same bytes
// are the raft snapshot (Pair.Snapshot): a descriptor of the logs, not
// their contents.
//
// Generation 0's local logs are dir/data and dir/events; generation g's
// are dir/logs.g/data and dir/logs.g/events, made by a restore from a
// peer (restore.go), which switches to them by writing the mark that
// names them: the rename of the mark is the one atomic step.
const (
	appliedName  = "applied"
	appliedMagic = "FRA2"
	markV1Magic  = "FRA1"
)

// mark is the state machine's durable position.
type mark struct {
	index            uint64
	nextData, nextEv seglog.Seq
	stateAt          uint64
	gen              uint64
}

func encodeMark(m mark) []byte {
	b := []byte(appliedMagic)
	b = binary.AppendUvarint(b, m.index)
	b = binary.AppendUvarint(b, uint64(m.nextData))
	b = binary.AppendUvarint(b, uint64(m.nextEv))
	b = binary.AppendUvarint(b, m.stateAt)
	b = binary.AppendUvarint(b, m.gen)
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

func decodeMark(b []byte) (mark, error) {
	fields := 5
	switch {
	case len(b) < len(appliedMagic)+4:
		return mark{}, fmt.Errorf("%w: applied mark header", ErrCorrupt)
	case string(b[:len(markV1Magic)]) == markV1Magic:
		fields = 4
	case string(b[:len(appliedMagic)]) != appliedMagic:
		return mark{}, fmt.Errorf("%w: applied mark header", ErrCorrupt)
	}
	body := b[:len(b)-4]
	if crc32.ChecksumIEEE(body) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return mark{}, fmt.Errorf("%w: applied mark checksum", ErrCorrupt)
	}
	r := body[len(appliedMagic):]
	var v [5]uint64
	for i := range v[:fields] {
		x, n := binary.Uvarint(r)
		if n <= 0 {
			return mark{}, fmt.Errorf("%w: applied mark body", ErrCorrupt)
		}
		v[i], r = x, r[n:]
	}
	if len(r) != 0 || v[1] == 0 || v[2] == 0 {
		return mark{}, fmt.Errorf("%w: applied mark body", ErrCorrupt)
	}
	return mark{index: v[0], nextData: seglog.Seq(v[1]), nextEv: seglog.Seq(v[2]), stateAt: v[3], gen: v[4]}, nil
}

// readMark reads dir's applied mark; ok false when there is none.
func readMark(dir string) (m mark, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, appliedName))
	if errors.Is(err, os.ErrNotExist) {
		return mark{}, false, nil
	}
	if err != nil {
		return mark{}, false, fmt.Errorf("replog: read %s: %w", filepath.Join(dir, appliedName), err)
	}
	m, err = decodeMark(b)
	if err != nil {
		return mark{}, false, fmt.Errorf("%s: %w", filepath.Join(dir, appliedName), err)
	}
	return m, true, nil
}

// writeFileAtomic writes data to dir/name through a temp file, fsyncs
// it, renames it into place and fsyncs the directory.
func writeFileAtomic(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		return fmt.Errorf("replog: write %s: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("replog: write %s: %w", name, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("replog: sync %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("replog: close %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("replog: rename %s: %w", name, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("replog: sync dir of %s: %w", name, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("replog: sync dir of %s: %w", name, err)
	}
	return nil
}
