package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// headerLen is a frame's header: the length of what follows (4 bytes,
// big-endian), then the group ID (8 bytes), counted in the length.
const headerLen = 12

// Frame errors.
var (
	// ErrFrameTooLarge: a frame's length is over Options.MaxFrame.
	ErrFrameTooLarge = errors.New("transport: frame too large")
	// ErrBadFrame: a frame too short to hold its group ID, or whose body
	// is not a raft message.
	ErrBadFrame = errors.New("transport: bad frame")
)

// appendFrame appends m's frame for group to buf. It fails with
// ErrFrameTooLarge, leaving buf as it was, when the frame would be over
// max bytes after the length.
func appendFrame(buf []byte, group uint64, m *pb.Message, max int) ([]byte, error) {
	size := 8 + proto.Size(m)
	if size > max {
		return buf, fmt.Errorf("%w: %s of %d bytes to %d, max %d", ErrFrameTooLarge, m.GetType(), size, m.GetTo(), max)
	}
	buf = binary.BigEndian.AppendUint32(buf, uint32(size))
	buf = binary.BigEndian.AppendUint64(buf, group)
	return proto.MarshalOptions{}.MarshalAppend(buf, m)
}

// readFrame reads one frame from r into buf (grown as needed, up to max)
// and returns its group and message, or, for a chunk frame (chunkBit
// set in the group), the group without the bit and the chunk's body,
// which borrows buf until the next read. A length over max fails with
// ErrFrameTooLarge before anything past the header is read; the caller
// must then cut the connection.
func readFrame(r io.Reader, buf []byte, max int) (group uint64, m *pb.Message, chunk, _ []byte, err error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, nil, buf, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	switch {
	case n > max:
		return 0, nil, nil, buf, fmt.Errorf("%w: %d bytes, max %d", ErrFrameTooLarge, n, max)
	case n < 8:
		return 0, nil, nil, buf, fmt.Errorf("%w: %d bytes cannot hold a group ID", ErrBadFrame, n)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, nil, buf, fmt.Errorf("transport: read %d-byte frame: %w", n, err)
	}
	group = binary.BigEndian.Uint64(buf)
	if group&chunkBit != 0 {
		return group &^ chunkBit, nil, buf[8:], buf, nil
	}
	m = &pb.Message{}
	// Unmarshal copies bytes fields, so buf is free for the next frame.
	if err := proto.Unmarshal(buf[8:], m); err != nil {
		return 0, nil, nil, buf, fmt.Errorf("%w: %v", ErrBadFrame, err)
	}
	return group, m, nil, buf, nil
}
