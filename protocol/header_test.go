package protocol

import (
	"errors"
	"testing"
)

func TestHeaderHelpers(t *testing.T) {
	b := AppendHeader(nil, HeaderReason, "max_deliveries", HeaderSeq, "2", "Empty")
	want := "NATS/1.0\r\nFibril-Reason: max_deliveries\r\nFibril-Seq: 2\r\nEmpty: \r\n\r\n"
	if string(b) != want {
		t.Fatalf("AppendHeader = %q", b)
	}
	if !validHeaderBlock(b) {
		t.Fatal("AppendHeader output is not a valid block")
	}
	if v, ok := HeaderValue(b, "fibril-seq"); !ok || string(v) != "2" {
		t.Fatalf("HeaderValue = %q, %v", v, ok)
	}
	if v, ok := HeaderValue(b, "Empty"); !ok || len(v) != 0 {
		t.Fatalf("HeaderValue(Empty) = %q, %v", v, ok)
	}
	if _, ok := HeaderValue(b, "NATS/1.0"); ok {
		t.Fatal("the status line is not a field")
	}
	if _, ok := HeaderValue([]byte("NATS/1.0\r\nbroken line\r\n\r\n"), "broken line"); ok {
		t.Fatal("a line without colon is not a field")
	}
	var keys []string
	RangeHeader(b, func(k, v []byte) bool { keys = append(keys, string(k)); return len(keys) < 2 })
	if len(keys) != 2 || keys[0] != HeaderReason {
		t.Fatalf("RangeHeader stopped wrong: %v", keys)
	}
}

func TestHandleAppendParse(t *testing.T) {
	hs := []Handle{
		{Topic: 1, Group: 1, Partition: 0, Seq: 1, Attempt: 1},
		{Topic: ^uint64(0), Group: ^uint64(0), Partition: ^uint32(0), Seq: ^uint64(0), Attempt: ^uint32(0)},
		{Topic: 42, Group: 7, Partition: 3, Seq: 1000000, Attempt: 9},
	}
	for _, h := range hs {
		s := h.Append(nil)
		if len(s) > MaxHandleLen || !IsHandleSubject(s) || CheckSubject(s, false) != nil {
			t.Fatalf("%v: %q is not a valid handle subject within %d bytes", h, s, MaxHandleLen)
		}
		got, err := ParseHandle(s)
		if err != nil || got != h {
			t.Fatalf("ParseHandle(%q) = %v, %v; want %v", s, got, err, h)
		}
	}
	if _, err := ParseHandle([]byte("$F.x")); !errors.Is(err, ErrInvalidHandle) {
		t.Fatalf("ParseHandle error = %v", err)
	}
	if (Handle{}).Valid() || IsHandleSubject([]byte("$F")) {
		t.Fatal("zero handle / short subject")
	}
	for k, s := range map[AckKind]string{AckAck: "+ACK", AckNak: "-NAK", AckProgress: "+WPI", AckTerm: "+TERM", 0: "AckKind(?)"} {
		if k.String() != s {
			t.Errorf("AckKind(%d).String() = %q", k, k.String())
		}
	}
}

func TestHandleParseAllocs(t *testing.T) {
	b := []byte("$F.12.34.5.678901.2")
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseHandle(b) }); n != 0 {
		t.Fatalf("ParseHandle allocates %v times", n)
	}
}
