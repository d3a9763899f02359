package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Snapshot transfers: a MsgSnap whose frame would pass MaxFrame travels
// as a run of chunk frames on the peer's link, each at most ChunkSize of
// the marshalled message. A chunk frame's group ID has chunkBit set; its
// body is the transfer's number, the message's total length, the
// chunk's offset and the CRC-32 of the whole message (chunkHeader bytes,
// big-endian), then the chunk. The receiver writes the chunks in order
// into a temporary file in Options.SnapshotDir and, once the last one is
// in and the checksum matches, reads the message back and hands it to
// the handler like any other. One transfer runs per link at a time, at
// most MaxSnapshot bytes, and must finish within SnapshotTimeout; a
// transfer cut short (a new one starting, the link failing, a bad chunk)
// is dropped with its file, and raft sends the snapshot again.

// chunkBit marks a chunk frame in the group ID (groups stay below it).
const chunkBit = 1 << 63

// chunkHeader is a chunk's header: transfer, total, offset, CRC-32.
const chunkHeader = 8 + 8 + 8 + 4

// ErrBadChunk: a chunk frame that does not continue its transfer, or a
// transfer whose checksum or message is wrong.
var ErrBadChunk = errors.New("transport: bad snapshot chunk")

// writeSnapshot sends om's message as chunk frames over w. It fails when
// a write fails or the transfer passes SnapshotTimeout.
func (t *Transport) writeSnapshot(w *bufio.Writer, conn net.Conn, om outMsg) error {
	body, err := proto.Marshal(om.m)
	if err != nil {
		return fmt.Errorf("transport: marshal snapshot for %d: %w", om.m.GetTo(), err)
	}
	xfer := t.xfers.Add(1)
	crc := crc32.ChecksumIEEE(body)
	end := time.Now().Add(t.opts.SnapshotTimeout)
	hdr := make([]byte, headerLen+chunkHeader)
	for off := 0; off < len(body); {
		n := min(t.opts.ChunkSize, len(body)-off)
		binary.BigEndian.PutUint32(hdr, uint32(8+chunkHeader+n))
		binary.BigEndian.PutUint64(hdr[4:], om.group|chunkBit)
		binary.BigEndian.PutUint64(hdr[12:], xfer)
		binary.BigEndian.PutUint64(hdr[20:], uint64(len(body)))
		binary.BigEndian.PutUint64(hdr[28:], uint64(off))
		binary.BigEndian.PutUint32(hdr[36:], crc)
		dl := time.Now().Add(t.opts.WriteTimeout)
		if dl.After(end) {
			dl = end
		}
		conn.SetWriteDeadline(dl)
		if _, err := w.Write(hdr); err != nil {
			return fmt.Errorf("transport: snapshot to %d at %d of %d bytes: %w", om.m.GetTo(), off, len(body), err)
		}
		if _, err := w.Write(body[off : off+n]); err != nil {
			return fmt.Errorf("transport: snapshot to %d at %d of %d bytes: %w", om.m.GetTo(), off, len(body), err)
		}
		off += n
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("transport: snapshot to %d: %w", om.m.GetTo(), err)
	}
	return nil
}

// assembly is a snapshot transfer being received on one connection.
type assembly struct {
	xfer, total, written uint64
	crc                  uint32
	group                uint64
	f                    *os.File
	start                time.Time
}

// drop removes the assembly's file.
func (a *assembly) drop() {
	if a != nil && a.f != nil {
		a.f.Close()
		os.Remove(a.f.Name())
		a.f = nil
	}
}

// chunk takes one chunk frame's body (borrowed until it returns) into a,
// starting a new assembly when it begins another transfer. It returns
// the assembly to keep and, once the transfer is whole, its message.
func (t *Transport) chunk(a *assembly, group uint64, body []byte) (*assembly, *pb.Message, error) {
	if len(body) < chunkHeader {
		return a, nil, fmt.Errorf("%w: %d bytes cannot hold a chunk header", ErrBadChunk, len(body))
	}
	xfer := binary.BigEndian.Uint64(body)
	total := binary.BigEndian.Uint64(body[8:])
	off := binary.BigEndian.Uint64(body[16:])
	crc := binary.BigEndian.Uint32(body[24:])
	data := body[chunkHeader:]
	if a == nil || a.xfer != xfer {
		a.drop()
		if off != 0 || total > uint64(t.opts.MaxSnapshot) || total == 0 {
			return nil, nil, fmt.Errorf("%w: transfer %d starts at %d of %d bytes (at most %d)", ErrBadChunk, xfer, off, total, t.opts.MaxSnapshot)
		}
		f, err := os.CreateTemp(t.opts.SnapshotDir, "snap-*.part")
		if err != nil {
			return nil, nil, fmt.Errorf("transport: receive snapshot: %w", err)
		}
		a = &assembly{xfer: xfer, total: total, crc: crc, group: group, f: f, start: time.Now()}
	}
	switch {
	case total != a.total || crc != a.crc || group != a.group || off != a.written || off+uint64(len(data)) > total:
		return a, nil, fmt.Errorf("%w: transfer %d: chunk at %d of %d bytes, %d received", ErrBadChunk, xfer, off, total, a.written)
	case time.Since(a.start) > t.opts.SnapshotTimeout:
		return a, nil, fmt.Errorf("%w: transfer %d took over %v", ErrBadChunk, xfer, t.opts.SnapshotTimeout)
	}
	if _, err := a.f.Write(data); err != nil {
		return a, nil, fmt.Errorf("transport: receive snapshot into %s: %w", a.f.Name(), err)
	}
	a.written += uint64(len(data))
	if a.written < a.total {
		return a, nil, nil
	}
	defer a.drop()
	b, err := os.ReadFile(a.f.Name())
	if err != nil {
		return nil, nil, fmt.Errorf("transport: read received snapshot %s: %w", a.f.Name(), err)
	}
	if crc32.ChecksumIEEE(b) != a.crc {
		return nil, nil, fmt.Errorf("%w: transfer %d: checksum mismatch", ErrBadChunk, xfer)
	}
	m := &pb.Message{}
	if err := proto.Unmarshal(b, m); err != nil || m.GetType() != pb.MessageType_MsgSnap {
		return nil, nil, fmt.Errorf("%w: transfer %d is not a snapshot message (%v)", ErrBadChunk, xfer, err)
	}
	return nil, m, nil
}
