package server

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/broker"
)

// TestPollAnswerSizeBoundsEncoding: the POLL answer buffer is sized once
// from pollAnswerSize; the encoding must never need more, whatever the
// subject, header, payload, handle and CRC mode.
func TestPollAnswerSizeBoundsEncoding(t *testing.T) {
	long := strings.Repeat("s", 200)
	maxHandle := broker.Handle{Topic: ^broker.TopicID(0), Group: ^broker.GroupID(0),
		Partition: ^broker.Partition(0), Seq: ^broker.Seq(0), Attempt: ^uint32(0)}
	cases := []struct {
		name string
		ds   []broker.Delivery
	}{
		{"empty", nil},
		{"one small", []broker.Delivery{{Subject: "a", Data: []byte("x")}}},
		{"empty payload", []broker.Delivery{{Subject: "a"}}},
		{"max handle, long subject", []broker.Delivery{{Handle: maxHandle, Subject: long, Data: make([]byte, 1000)}}},
		{"headers", []broker.Delivery{{Handle: maxHandle, Subject: long,
			Header: []byte("NATS/1.0\r\nK: v\r\n\r\n"), Data: make([]byte, 123456)}}},
		{"many", func() []broker.Delivery {
			ds := make([]broker.Delivery, 1024)
			for i := range ds {
				ds[i] = broker.Delivery{Handle: maxHandle, Subject: long, Header: []byte("NATS/1.0\r\n\r\n")}
			}
			return ds
		}()},
	}
	for _, tc := range cases {
		for _, crc := range []bool{false, true} {
			for _, headers := range []bool{false, true} {
				var buf []byte
				for i := range tc.ds {
					buf = appendDelivery(buf, &tc.ds[i], "0", crc, headers)
				}
				buf = protocol.AppendPollDone(buf, len(tc.ds))
				if got, bound := len(buf), pollAnswerSize(tc.ds); got > bound {
					t.Errorf("%s crc=%v headers=%v: encoded %d bytes, bound %d", tc.name, crc, headers, got, bound)
				}
			}
		}
	}
}

// TestOutPoolReusesBuffers: a buffer given back is handed out again for a
// request of its size class, every buffer handed out has a class's exact
// capacity, and one over the largest class is never kept.
func TestOutPoolReusesBuffers(t *testing.T) {
	var p outPool
	for _, n := range []int{0, 1, 100, chunkSize, chunkSize + 1, 1 << 20, maxPooledOut} {
		b := p.get(n)
		i, _ := classOf(n)
		if len(b) != 0 || cap(b) != chunkSize<<i || cap(b) < n {
			t.Errorf("get(%d): len %d cap %d, want empty with cap %d", n, len(b), cap(b), chunkSize<<i)
		}
	}
	if b := p.get(maxPooledOut + 1); cap(b) != maxPooledOut+1 {
		t.Errorf("get(maxPooledOut+1): cap %d, want exactly the size", cap(b))
	}
	big := p.get(1 << 20)
	p.put(make([]byte, 10, maxPooledOut+1)) // over the bound: dropped
	p.put(make([]byte, 10, 3*chunkSize))    // not a class's size: dropped
	p.put(append(big, "data"...))
	got := p.get(1<<20 - 5)
	if len(got) != 0 || cap(got) != 1<<20 {
		t.Fatalf("get after put: len %d cap %d", len(got), cap(got))
	}
}

// TestChunksKeepOrderWithoutGrowing: the outbox appends into chunks in
// order, never reallocating a buffer (each keeps its pooled capacity),
// and counts its bytes exactly.
func TestChunksKeepOrderWithoutGrowing(t *testing.T) {
	var p outPool
	var q chunks
	var want []byte
	pieces := []int{1, 100, chunkSize - 101, 1, chunkSize, 3 * chunkSize / 2, 7, 5 << 20}
	for i, n := range pieces {
		b := bytes.Repeat([]byte{byte('a' + i)}, n)
		if i%2 == 0 {
			q.write(&p, b)
		} else {
			buf := q.room(&p, n)
			q.commit(append(buf, b...))
		}
		want = append(want, b...)
		if q.n != len(want) {
			t.Fatalf("after %d pieces: n %d, want %d", i+1, q.n, len(want))
		}
	}
	var own chunks
	own.write(&p, []byte("owned"))
	q.moveFrom(&own)
	want = append(want, "owned"...)
	if own.n != 0 || len(own.bufs) != 0 {
		t.Fatalf("moveFrom left %d bytes in its source", own.n)
	}
	for _, b := range q.bufs {
		if i, ok := classOf(cap(b)); !ok || cap(b) != chunkSize<<i {
			t.Errorf("a chunk of cap %d: not a pooled size (it was reallocated)", cap(b))
		}
	}
	bufs, n := q.takeInto(nil)
	if n != len(want) || !bytes.Equal(bytes.Join(bufs, nil), want) || q.n != 0 || len(q.bufs) != 0 {
		t.Fatalf("takeInto: %d bytes (want %d), equal %v, left %d", n, len(want), bytes.Equal(bytes.Join(bufs, nil), want), q.n)
	}
}

// TestTransportPiecesArePowersOfTwo: the pieces handed to gnet are powers
// of two (gnet copies each into a node of its size rounded up to one)
// except a last one shorter than minPiece, and they are the buffer in
// order.
func TestTransportPiecesArePowersOfTwo(t *testing.T) {
	for _, n := range []int{1, minPiece - 1, minPiece, minPiece + 1, 32<<10 + 100, chunkSize, chunkSize + 1,
		8<<20 + 4321, maxPooledOut} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i * 7)
		}
		iov := transportPieces(nil, b)
		for i, p := range iov {
			last := i == len(iov)-1
			if len(p)&(len(p)-1) != 0 && !(last && len(p) < minPiece) {
				t.Errorf("n=%d: piece %d of %d bytes is not a power of two", n, i, len(p))
			}
			if len(p) > chunkSize || cap(p) != len(p) {
				t.Errorf("n=%d: piece %d len %d cap %d", n, i, len(p), cap(p))
			}
		}
		if !bytes.Equal(bytes.Join(iov, nil), b) {
			t.Errorf("n=%d: pieces are not the buffer", n)
		}
		if max := n/chunkSize + 8 + 1; len(iov) > max {
			t.Errorf("n=%d: %d pieces, want <= %d", n, len(iov), max)
		}
	}
}

// TestWritePiecesBoundsEachWritev: however many buffers, no writev gets
// more than maxPieces slices, and the bytes arrive in order.
func TestWritePiecesBoundsEachWritev(t *testing.T) {
	var bufs [][]byte
	var want []byte
	for i := range 3000 {
		b := bytes.Repeat([]byte{byte(i)}, 1+i%700)
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	bufs = append(bufs, make([]byte, 4<<20))
	want = append(want, make([]byte, 4<<20)...)
	var w recordingWriter
	if _, err := writePieces(&w, bufs, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.got, want) {
		t.Fatal("written bytes differ")
	}
	if w.most > maxPieces || w.calls < 2 {
		t.Fatalf("%d writev calls, the largest of %d slices (want <= %d)", w.calls, w.most, maxPieces)
	}
}

type recordingWriter struct {
	got         []byte
	calls, most int
}

func (w *recordingWriter) Writev(bs [][]byte) (int, error) {
	w.calls++
	w.most = max(w.most, len(bs))
	n := 0
	for _, b := range bs {
		w.got = append(w.got, b...)
		n += len(b)
	}
	return n, nil
}
