package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

func msg(from, to uint64, data string) *pb.Message {
	t := pb.MessageType_MsgApp
	return &pb.Message{Type: &t, From: &from, To: &to, Entries: []*pb.Entry{{Data: []byte(data)}}}
}

func TestFrame(t *testing.T) {
	good, err := appendFrame(nil, 7, msg(1, 2, "hello"), 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	header := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	for _, c := range []struct {
		name  string
		in    []byte
		max   int
		group uint64
		err   error
	}{
		{"round trip", good, 1 << 10, 7, nil},
		{"over max", good, len(good) - 5, 0, ErrFrameTooLarge},
		{"huge length, nothing after", header(1 << 31), 1 << 20, 0, ErrFrameTooLarge},
		{"too short for a group", append(header(4), 0, 0, 0, 0), 1 << 10, 0, ErrBadFrame},
		{"body not a message", append(append(header(10), 0, 0, 0, 0, 0, 0, 0, 1), 0xff, 0xff), 1 << 10, 0, ErrBadFrame},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, m, _, _, err := readFrame(bytes.NewReader(c.in), nil, c.max)
			if !errors.Is(err, c.err) {
				t.Fatalf("err = %v, want %v", err, c.err)
			}
			if c.err == nil && (g != c.group || string(m.GetEntries()[0].GetData()) != "hello" || m.GetFrom() != 1) {
				t.Fatalf("got group %d, %v", g, m)
			}
		})
	}
	if _, err := appendFrame(nil, 7, msg(1, 2, "hello"), 10); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("appendFrame over max: %v", err)
	}
}
