package server

import (
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

// TestOutPoolReusesBuffers: a buffer given back is handed out again when it
// is big enough, and a request bigger than what the pool holds gets a
// fitting buffer.
func TestOutPoolReusesBuffers(t *testing.T) {
	var p outPool
	b := p.get(100)
	if cap(b) < minOut || len(b) != 0 {
		t.Fatalf("get(100): len %d cap %d, want empty with cap >= %d", len(b), cap(b), minOut)
	}
	big := p.get(1 << 20)
	if cap(big) < 1<<20 {
		t.Fatalf("get(1 MiB) cap %d", cap(big))
	}
	huge := make([]byte, 10, maxPooledOut+1)
	p.put(huge) // over the bound: dropped
	p.put(append(big, "data"...))
	got := p.get(1000)
	if len(got) != 0 {
		t.Fatalf("pooled buffer not emptied: len %d", len(got))
	}
	if cap(got) > maxPooledOut {
		t.Fatalf("a buffer over maxPooledOut came back (cap %d)", cap(got))
	}
}
