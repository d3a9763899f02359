package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fibrilmq/fibril/server/broker"
)

// TestGroupInfoShowsDamage checks GROUP INFO's answer (SPEC.md section 10):
// a partition where the group stopped at a damaged record carries
// damaged_seq and damaged_error; the others carry neither.
func TestGroupInfoShowsDamage(t *testing.T) {
	in := broker.GroupInfo{Topic: "orders", Name: "billing", Partitions: []broker.GroupPartitionInfo{
		{Partition: 0, Frontier: 5, Next: 9},
		{Partition: 1, Frontier: 40, Next: 40, DamagedSeq: 40, DamagedError: "seglog: corrupt record in /d/1.seg at offset 96 (seq 40): data checksum mismatch"},
	}}
	b, err := json.Marshal(groupInfo(in))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, `{"partition":0,"ack_floor":4,"delivered":8}`) ||
		!strings.Contains(s, `"damaged_seq":40,"damaged_error":"seglog: corrupt record in /d/1.seg at offset 96 (seq 40): data checksum mismatch"`) {
		t.Fatalf("GROUP INFO answer: %s", s)
	}
}
