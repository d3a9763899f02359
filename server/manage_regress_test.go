package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// TestGroupInfoCountsCurrentAfterPollAndAck is the regression test for
// conformance's flaky "group-info-counts": GROUP INFO right after an
// answered POLL or ACK must already count them (SPEC.md 10.2).
func TestGroupInfoCountsCurrentAfterPollAndAck(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	w.send("TOPIC CREATE gi\r\n")
	w.expect(`^\+OK `)
	w.send("GROUP CREATE gi g\r\n")
	w.expect(`^\+OK `)
	info := func() protocol.GroupInfo {
		t.Helper()
		w.send("GROUP INFO gi g\r\n")
		l := w.expect(`^\+OK \{`)
		var in protocol.GroupInfo
		if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "+OK ")), &in); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		return in
	}
	for i := 1; i <= 30; i++ {
		w.send("PUB gi 1\r\nx\r\n")
		w.expect(`^\+OK 0:\d+$`)
		w.send("POLL gi g 1\r\n")
		h := w.expectDelivery(`^MSG gi 0 \S+ 1$`, "x")
		w.expect(`^\+OK 1$`)
		in := info()
		if in.Inflight != 1 || in.Pending != 0 || len(in.Partitions) != 1 || in.Partitions[0].Delivered != uint64(i) {
			t.Fatalf("round %d after POLL: %+v", i, in)
		}
		w.send("ACK " + h + "\r\n")
		w.expect(`^\+OK$`)
		in = info()
		if in.Inflight != 0 || in.Pending != 0 || in.Partitions[0].AckFloor != uint64(i) {
			t.Fatalf("round %d after ACK: %+v", i, in)
		}
	}
	// A nack makes the next delivery a redelivery.
	w.send("PUB gi 1\r\ny\r\n")
	w.expect(`^\+OK 0:31$`)
	w.send("POLL gi g 1\r\n")
	h := w.expectDelivery(`^MSG gi 0 \S+ 1$`, "y")
	w.expect(`^\+OK 1$`)
	w.send("NACK " + h + "\r\n")
	w.expect(`^\+OK$`)
	w.send("POLL gi g 1 1000\r\n")
	h2 := w.expectDelivery(`^MSG gi 0 \S+\.2 1$`, "y")
	w.expect(`^\+OK 1$`)
	if in := info(); in.Redelivered != 1 || in.Inflight != 1 || in.DeadLettered != 0 {
		t.Fatalf("after redelivery: %+v", in)
	}
	// REJECT dead-letters it.
	w.send("REJECT " + h2 + "\r\n")
	w.expect(`^\+OK$`)
	waitFor(t, 5*time.Second, "dead_lettered 1 in GROUP INFO", func() bool {
		in := info()
		return in.DeadLettered == 1 && in.Inflight == 0
	})
}
