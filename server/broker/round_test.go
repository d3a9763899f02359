package broker

import (
	"testing"
)

// TestRoundInput: publishes are gathered in order with only the
// reservations they hold, their entries carry each one's meta (subject
// and header length, never sharing bytes with the next), body, CRC and
// time, and nothing of the round is referred to once it is cleared,
// recycled and reset.
func TestRoundInput(t *testing.T) {
	var in roundInput
	in.cmds = []command{
		{kind: cmdPublish, subject: "a.b", hdrLen: 2, body: []byte("h1xy"), crc: 7, reserved: true},
		{kind: cmdSettle},
		{kind: cmdPublish, subject: "c", body: []byte("z")},
		{kind: cmdPublish, subject: "", hdrLen: 0, body: []byte("long body"), reserved: true},
	}
	if in.idle() {
		t.Fatal("a round with commands is idle")
	}
	for i := range in.cmds {
		if c := &in.cmds[i]; c.kind == cmdPublish {
			in.addPublish(c)
		}
	}
	if len(in.pubs) != 3 || in.pubs[1].subject != "c" {
		t.Fatalf("gathered %d publishes", len(in.pubs))
	}
	msgs, bytes := in.takeReserved()
	if msgs != 2 || bytes != int64(len("h1xy")+len("long body")) {
		t.Fatalf("reserved %d msgs %d bytes", msgs, bytes)
	}
	if msgs, _ := in.takeReserved(); msgs != 0 {
		t.Fatal("reservations given back twice")
	}
	es := in.dataEntries(42)
	if len(es) != 3 {
		t.Fatalf("%d entries", len(es))
	}
	for i, e := range es {
		c := in.pubs[i]
		hdrLen, subject, err := decodeMeta(e.Meta)
		if err != nil || hdrLen != c.hdrLen || subject != c.subject {
			t.Fatalf("entry %d meta: %d %q %v; want %d %q", i, hdrLen, subject, err, c.hdrLen, c.subject)
		}
		if string(e.Data) != string(c.body) || e.CRC != c.crc || e.Time != 42 {
			t.Fatalf("entry %d: %+v", i, e)
		}
		if cap(e.Meta) != len(e.Meta) {
			t.Fatalf("entry %d's meta can grow into the next one's", i)
		}
	}
	in.clearEntries()
	for i, e := range in.entries {
		if e.Data != nil || e.Meta != nil {
			t.Fatalf("entry %d still refers to the round", i)
		}
	}
	var pool bodyPool
	in.recycle(&pool)
	for i, c := range in.pubs {
		if c.body != nil || c.buf != nil {
			t.Fatalf("publish %d keeps its body after recycle", i)
		}
	}
	in.reset()
	for i, c := range in.cmds {
		if c.kind != 0 || c.body != nil {
			t.Fatalf("command %d kept after reset", i)
		}
	}
}
