package wire

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestTopicConfigJSON pins the JSON names of the one topic schema to
// SPEC.md 10.1: protocol, the SDK and the engine all encode this struct.
func TestTopicConfigJSON(t *testing.T) {
	c := TopicConfig{
		Subjects: []string{"orders.*"}, Partitions: 2, Durability: DurabilitySync, Retention: RetentionLimits,
		MaxAgeMs: 1, MaxBytes: 2, MaxMsgs: 3, MaxUnsettledMsgs: 4, MaxUnsettledBytes: 5,
		FullPolicy: FullReject, BlockTimeoutMs: 6, Compression: CompressionZstd,
	}
	want := `{"subjects":["orders.*"],"partitions":2,"durability":"sync","retention":"limits","max_age_ms":1,"max_bytes":2,"max_msgs":3,"max_unsettled_msgs":4,"max_unsettled_bytes":5,"full_policy":"reject","block_timeout_ms":6,"compression":"zstd"}`
	b, err := json.Marshal(c)
	if err != nil || string(b) != want {
		t.Fatalf("Marshal = %s, %v\nwant %s", b, err, want)
	}
	var back TopicConfig
	if err := json.Unmarshal(b, &back); err != nil || back.Compression != c.Compression || back.BlockTimeoutMs != 6 {
		t.Fatalf("Unmarshal = %+v, %v", back, err)
	}
	if b, _ := json.Marshal(TopicConfig{}); string(b) != "{}" {
		t.Fatalf("zero config = %s, want {}", b)
	}
}

// TestGroupConfigJSON pins the JSON names of the one group schema to
// SPEC.md 10.2: protocol, the SDK and the engine all encode this struct.
func TestGroupConfigJSON(t *testing.T) {
	c := GroupConfig{Start: StartNew, LeaseMs: 1500, BackoffMs: []int64{10, 20}, MaxDeliveries: -1, DeadLetter: "-", NATSAck: NATSAckExplicit}
	want := `{"start":"new","lease_ms":1500,"backoff_ms":[10,20],"max_deliveries":-1,"dead_letter":"-","nats_ack":"explicit"}`
	b, err := json.Marshal(c)
	if err != nil || string(b) != want {
		t.Fatalf("Marshal = %s, %v\nwant %s", b, err, want)
	}
	var back GroupConfig
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("Unmarshal = %+v, %v, want %+v", back, err, c)
	}
	if b, _ := json.Marshal(GroupConfig{}); string(b) != "{}" {
		t.Fatalf("zero config = %s, want {}", b)
	}
}
