package protocol

import (
	"errors"
	"testing"
)

func TestParseConnect(t *testing.T) {
	tests := []struct {
		in               string
		ok               bool
		fibril, confirms bool
		crc, echo        bool
	}{
		{`{}`, true, false, false, false, true},
		{`{"verbose":false,"pedantic":false,"lang":"go","echo":false,"unknown_field":1}`, true, false, false, false, false},
		{`{"fibril":1,"crc":true}`, true, true, true, true, true},
		{`{"confirm":true}`, true, false, true, false, true},
		{`{"fibril":2}`, false, false, false, false, false},
		{`{"protocol":2}`, false, false, false, false, false},
		{`{"fibril":"1"}`, false, false, false, false, false},
		{`not json`, false, false, false, false, false},
	}
	for _, tc := range tests {
		c, err := ParseConnect([]byte(tc.in))
		if !tc.ok {
			if !errors.Is(err, ErrInvalidConnect) {
				t.Errorf("ParseConnect(%s) err = %v, want invalid_connect", tc.in, err)
			}
			continue
		}
		if err != nil || (c.Fibril == 1) != tc.fibril || c.Confirms() != tc.confirms || c.CRC != tc.crc || c.EchoOn() != tc.echo {
			t.Errorf("ParseConnect(%s) = %+v, %v", tc.in, c, err)
		}
	}
	if _, err := ParseInfo([]byte("{")); err == nil {
		t.Error("ParseInfo of bad JSON did not fail")
	}
}

func TestParseConfirm(t *testing.T) {
	tests := []struct {
		in     string
		pos    Position
		stored bool
		ok     bool
	}{
		{"0:1", Position{Seq: 1}, true, true},
		{" 4294967295:18446744073709551615 ", Position{Partition: 4294967295, Seq: 18446744073709551615}, true, true},
		{"2:5 duplicate", Position{Partition: 2, Seq: 5, Duplicate: true}, true, true},
		{"2:5 dup", Position{}, false, false},
		{"- duplicate", Position{}, false, false},
		{"-", Position{}, false, true},
		{"", Position{}, false, false},
		{"1", Position{}, false, false},
		{":1", Position{}, false, false},
		{"4294967296:1", Position{}, false, false},
		{"1:x", Position{}, false, false},
	}
	for _, tc := range tests {
		pos, stored, err := ParseConfirm([]byte(tc.in))
		if (err == nil) != tc.ok || pos != tc.pos || stored != tc.stored {
			t.Errorf("ParseConfirm(%q) = %v, %v, %v", tc.in, pos, stored, err)
		}
	}
	if n, err := ParsePollDone([]byte("12")); n != 12 || err != nil {
		t.Errorf("ParsePollDone = %d, %v", n, err)
	}
	if _, err := ParsePollDone([]byte("1:2")); err == nil {
		t.Error("ParsePollDone(1:2) did not fail")
	}
}

func TestDecodeStrict(t *testing.T) {
	var tc TopicConfig
	if err := DecodeStrict([]byte(`{"partitions":4,"subjects":["orders.>"],"durability":"sync","max_age_ms":1000}`), &tc); err != nil ||
		tc.Partitions != 4 || tc.Subjects[0] != "orders.>" || tc.Durability != "sync" || tc.MaxAgeMs != 1000 {
		t.Fatalf("DecodeStrict = %+v, %v", tc, err)
	}
	var gc GroupConfig
	if err := DecodeStrict([]byte(`{"lease_ms":5000,"max_deliveries":2,"start":"new","dead_letter":"x","nats_ack":"explicit"}`), &gc); err != nil ||
		gc.LeaseMs != 5000 || gc.MaxDeliveries != 2 || gc.Start != "new" || gc.DeadLetter != "x" || gc.NATSAck != "explicit" {
		t.Fatalf("DecodeStrict group = %+v, %v", gc, err)
	}
	for _, bad := range []string{`{"partitions":"4"}`, `{"nope":1}`, `{} {}`, `[`} {
		if err := DecodeStrict([]byte(bad), &tc); !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("DecodeStrict(%s) = %v, want invalid_json", bad, err)
		}
	}
	if err := DecodeStrict(nil, &tc); err != nil {
		t.Errorf("DecodeStrict(nil) = %v", err)
	}
}
