package jsapi

import "testing"

func TestAckSubjectRoundTrip(t *testing.T) {
	for _, a := range []Ack{
		{Stream: "S", Consumer: "c", Delivered: 1, StreamSeq: 1, ConsumerSeq: 1, Timestamp: 1, Pending: 0},
		{Stream: "ORDERS-1", Consumer: "w_2", Delivered: 1<<32 - 1, StreamSeq: 1<<64 - 1, ConsumerSeq: 7, Timestamp: -5, Pending: 9},
	} {
		got, ok := ParseAck(string(AppendAckSubject(nil, a)))
		if !ok || got != a {
			t.Fatalf("%+v: parsed %+v %v", a, got, ok)
		}
	}
	for _, bad := range []string{
		"$JS.ACK.S.c.1.1.1.1", "$JS.ACK.S.c.1.1.1.1.0.9", "$JS.ACK.S.c.0.1.1.1.0", "$JS.ACK.S.c.1.0.1.1.0",
		"$JS.ACK.S.c.x.1.1.1.0", "$JS.ACK.S*.c.1.1.1.1.0", "$JS.API.S.c.1.1.1.1.0", "$JS.ACK..c.1.1.1.1.0",
	} {
		if a, ok := ParseAck(bad); ok {
			t.Errorf("%q parsed as %+v", bad, a)
		}
	}
}

func FuzzParseAck(f *testing.F) {
	f.Add("$JS.ACK.S.c.1.2.3.4.5")
	f.Add("$JS.ACK.a.b.c.d.e.f.g")
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := ParseAck(s)
		if ok && string(AppendAckSubject(nil, a)) != s {
			// Numbers with leading zeros or '+' parse too; the round trip
			// must parse back to the same value.
			if b, ok2 := ParseAck(string(AppendAckSubject(nil, a))); !ok2 || b != a {
				t.Fatalf("%q: %+v does not round-trip", s, a)
			}
		}
	})
}
