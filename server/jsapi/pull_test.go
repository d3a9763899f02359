package jsapi

import (
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/broker"
)

// TestBatchRepliesAreAckSubjects: the messages of a batch carry their own
// deliveries' bytes and ack subjects, in order, however the subject buffer
// grew, and a reset batch is empty and holds no borrowed bytes.
func TestBatchRepliesAreAckSubjects(t *testing.T) {
	var b batch
	for round := range 3 {
		var want []Ack
		for i := range 50 * (round + 1) {
			d := broker.Delivery{Subject: "s.x", Data: []byte{byte(i)}, Attempt: uint32(i + 1), Time: time.Unix(0, int64(i))}
			d.Handle.Seq = broker.Seq(i + 1)
			a := Ack{Stream: "S", Consumer: "c", Delivered: d.Attempt, StreamSeq: uint64(i + 1), ConsumerSeq: uint64(1000 + i), Timestamp: int64(i), Pending: uint64(i)}
			b.add(&d, a)
			want = append(want, a)
		}
		ms := b.msgs()
		if len(ms) != len(want) {
			t.Fatalf("round %d: %d messages, want %d", round, len(ms), len(want))
		}
		for i, m := range ms {
			got, ok := ParseAck(string(m.Reply))
			if !ok || got != want[i] || m.Subject != "s.x" || len(m.Data) != 1 || m.Data[0] != byte(i) {
				t.Fatalf("round %d message %d: %+v (reply %q parsed %+v %v), want ack %+v", round, i, m, m.Reply, got, ok, want[i])
			}
		}
		b.reset()
		if len(b.msgs()) != 0 || b.out[:cap(b.out)][0].Data != nil {
			t.Fatalf("round %d: reset batch still holds messages", round)
		}
	}
}

// BenchmarkBatchAdd: the per-delivery work of a pull request's poll
// callback (ack subject, message entry), reused from poll to poll.
func BenchmarkBatchAdd(b *testing.B) {
	var bt batch
	d := broker.Delivery{Subject: "bench.x", Data: make([]byte, 1024), Attempt: 1, Time: time.Now()}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		d.Handle.Seq = broker.Seq(i)
		bt.add(&d, Ack{Stream: "BENCH", Consumer: "bench", Delivered: 1, StreamSeq: uint64(i), ConsumerSeq: uint64(i), Timestamp: d.Time.UnixNano(), Pending: 99})
		if i%500 == 0 {
			_ = bt.msgs()
			bt.reset()
		}
	}
}
