package fibril

import (
	"strings"
	"testing"

	"github.com/fibrilmq/fibril/protocol"
)

// TestAckLine: the line copies each handle's text as sent, holds as many
// handles as fit the limit (at least one), and equals what encoding the
// parsed handles gives.
func TestAckLine(t *testing.T) {
	msgs := make([]*Msg, 5)
	for i := range msgs {
		h := protocol.Handle{Topic: 7, Group: 3, Partition: 1, Seq: uint64(1000 + i), Attempt: 1}
		msgs[i] = &Msg{handle: h.Append(nil), h: h, hok: true}
	}
	one := len(msgs[0].handle) // every handle here has the same length
	tests := []struct {
		limit, want int
	}{
		{1 << 20, 5},
		{3 + 2*(1+one), 2},     // exactly two fit
		{3 + 2*(1+one) - 1, 1}, // one byte short of two
		{1, 1},                 // never fewer than one
	}
	for _, tt := range tests {
		n, line := ackLine(msgs, tt.limit)
		if n != tt.want {
			t.Errorf("limit %d: %d handles, want %d", tt.limit, n, tt.want)
		}
		want := []byte("ACK")
		for _, m := range msgs[:n] {
			want = m.h.Append(append(want, ' '))
		}
		want = append(want, "\r\n"...)
		if string(line) != string(want) || cap(line) != len(line) {
			t.Errorf("limit %d: line %q (cap %d), want %q", tt.limit, line, cap(line), want)
		}
		if n > 1 && len(line)-2 > tt.limit {
			t.Errorf("limit %d: line of %d bytes", tt.limit, len(line)-2)
		}
		if !strings.HasPrefix(string(line), "ACK $F.") {
			t.Errorf("line %q", line)
		}
	}
}
