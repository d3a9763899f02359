package broker

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
)

// historyOf renders History(seq) as "kind/owner/reason/arg" strings.
func historyOf(t *testing.T, tp *Topic, seq Seq) []string {
	t.Helper()
	evs, err := tp.History(context.Background(), 0, seq)
	if err != nil {
		t.Fatalf("History(%d): %v", seq, err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s/%d/%s/%d", e.Kind, e.Owner, e.Reason, e.Arg))
	}
	return out
}

func TestHistoryOwnersAndSettleKinds(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, clk)
	tp := e.topic("jobs", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{LeaseMs: 1000, DeadLetter: "-"})
	for _, s := range []string{"ack", "nack", "reject", "expire", "release"} {
		e.publish(tp, s)
	}
	// offset i goes to owner 16+i (the lowest ready offset goes first)
	ds := make([]Delivery, 6)
	for i := 1; i <= 5; i++ {
		got := e.pollNow(g, 1, OwnerID(16+i))
		if len(got) != 1 || got[0].Handle.Seq != Seq(i) {
			t.Fatalf("poll %d: %+v", i, got)
		}
		ds[i] = got[0]
	}
	for _, c := range []struct {
		d  Delivery
		op SettleOp
	}{{ds[1], Ack()}, {ds[2], Nack(5 * time.Second)}, {ds[3], Reject()}} {
		if err := e.settle(c.d, c.op); err != nil {
			t.Fatal(err)
		}
	}
	e.b.ReleaseOwner(21)
	waitFor(t, "the release of owner 21", func() bool { return len(historyOf(t, tp, 5)) == 2 })
	clk.Advance(time.Second + time.Millisecond) // offset 4's lease (owner 20) runs out
	waitFor(t, "the expiry of offset 4", func() bool { return len(historyOf(t, tp, 4)) == 2 })
	waitFor(t, "offset 3's dead-lettering", func() bool { return len(historyOf(t, tp, 3)) == 3 })

	want := map[Seq][]string{
		1: {"deliver/17//1", "settle/17/ack/1"},
		2: {"deliver/18//1", "nack/18//5000000000"},
		3: {"deliver/19//1", "dead_letter/19/rejected/2", "settle/0/dead_lettered/2"},
		4: {"deliver/20//1", "expire/20//1"},
		5: {"deliver/21//1", "release/21//1"},
	}
	check := func(when string) {
		t.Helper()
		for seq := Seq(1); seq <= 5; seq++ {
			if got := historyOf(t, tp, seq); !slices.Equal(got, want[seq]) {
				t.Errorf("%s: History(%d)\n got %q\nwant %q", when, seq, got, want[seq])
			}
		}
	}
	check("live")

	// Close snapshots; the events it covers stay readable after a restart,
	// and after one more snapshot with nothing new.
	e.restart()
	tp = e.topic("jobs", TopicConfig{})
	check("after restart")
	e.restart()
	tp = e.topic("jobs", TopicConfig{})
	check("after a second restart")

	// The next snapshot after new events drops the window before it: the
	// events the restart snapshots covered are gone, newer ones stay.
	g = e.group(tp, "w", GroupConfig{LeaseMs: 1000, DeadLetter: "-"})
	d := e.pollNow(g, 1, 30) // offset 2 again (5 s delay reset by restart)
	if len(d) != 1 || d[0].Handle.Seq != 2 {
		t.Fatalf("redelivery after restart: %+v", d)
	}
	e.restart()
	tp = e.topic("jobs", TopicConfig{})
	if got, want := historyOf(t, tp, 2), []string{"deliver/18//1", "nack/18//5000000000", "deliver/30//2"}; !slices.Equal(got, want) {
		t.Fatalf("History(2) after a third restart\n got %q\nwant %q", got, want)
	}
	g = e.group(tp, "w", GroupConfig{LeaseMs: 1000, DeadLetter: "-"})
	e.pollNow(g, 1, 31)
	e.restart()
	tp = e.topic("jobs", TopicConfig{})
	if got := historyOf(t, tp, 2); len(got) == 0 || got[len(got)-1] != "deliver/31//3" {
		t.Fatalf("History(2) lost its newest delivery: %q", got)
	}
}

// TestReplayV1Events writes events in the format before owners and settle
// reasons (a v1 record) behind a broker's back; they must replay into the
// same state and show in History without owner or reason.
func TestReplayV1Events(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("old", TopicConfig{})
	g := e.group(tp, "w", GroupConfig{})
	gid := byte(g.ID())
	if g.ID() >= 0x80 {
		t.Fatalf("group id %d does not fit the one-byte literal below", g.ID())
	}
	e.publish(tp, "a")
	e.publish(tp, "b")
	dir := filepath.Join(e.b.topicDir(tp.ID()), "0", eventsLogName)
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	e.b = nil

	l, err := seglog.Open(dir, seglog.Options{SegmentSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	v1 := []byte{
		evDeliver, gid, 1, 1, // offset 1, delivery 1
		evSettle, gid, 1, 0, // offset 1 settled (v1: no reason)
		evDeliver, gid, 2, 1,
		evDeliver, gid, 2, 2, // offset 2 delivered twice, unsettled
	}
	if _, err := l.Append([]seglog.Entry{{Data: v1}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	e.open()
	tp = e.topic("old", TopicConfig{})
	if got, want := historyOf(t, tp, 1), []string{"deliver/0//1", "settle/0//0"}; !slices.Equal(got, want) {
		t.Fatalf("History(1) of v1 events\n got %q\nwant %q", got, want)
	}
	g = e.group(tp, "w", GroupConfig{})
	ds := e.pollNow(g, 10, 0)
	if len(ds) != 1 || ds[0].Handle.Seq != 2 || ds[0].Attempt != 3 {
		t.Fatalf("after replaying v1 events: %+v, want offset 2 at delivery 3", ds)
	}
}

// TestEventsRoundTrip: every kind, with and without an owner, decodes to
// what was encoded; v1 bytes are a valid subset.
func TestEventsRoundTrip(t *testing.T) {
	var in []event
	for k := evDeliver; k <= evLastKind; k++ {
		in = append(in, event{kind: k, group: 7, seq: 300, arg: 1 << 40}, event{kind: k, group: 1, seq: 2, arg: 3, owner: 1 << 33})
	}
	var b []byte
	for _, ev := range in {
		b = appendEvent(b, ev)
	}
	var out []event
	if err := decodeEvents(b, func(ev event) { out = append(out, ev) }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(in, out) {
		t.Fatalf("round trip\n got %+v\nwant %+v", out, in)
	}
	for _, bad := range [][]byte{{evLastKind + 1, 1, 1, 1}, {evDeliver | evHasOwner, 1, 1, 1}, {0, 1, 1, 1}} {
		if err := decodeEvents(bad, func(event) {}); err == nil {
			t.Errorf("decodeEvents(%v) accepted", bad)
		}
	}
}
