package history

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

const msec = int64(1e6)

func pub(proc int, v, pos string, at int64) Op {
	out := OK
	if pos == "" {
		out = Info
	}
	return Op{Kind: Publish, Proc: proc, Topic: "t", Value: v, Pos: pos, Outcome: out, Invoke: at * msec, Complete: (at + 1) * msec}
}

func del(proc int, v, pos, handle string, at int64) Op {
	return Op{Kind: Deliver, Proc: proc, Topic: "t", Group: "g", Value: v, Pos: pos, Handle: handle, Attempt: 1,
		LeaseMs: 1000, Outcome: OK, Invoke: at * msec, Complete: (at + 1) * msec}
}

func settle(k Kind, proc int, v, handle string, at int64, out Outcome) Op {
	return Op{Kind: k, Proc: proc, Topic: "t", Group: "g", Value: v, Handle: handle, Outcome: out, Invoke: at * msec, Complete: (at + 1) * msec}
}

func done(at int64) Op {
	return Op{Kind: Phase, Proc: -1, Value: PhaseDone, Outcome: OK, Invoke: at * msec, Complete: at * msec}
}

// base is a clean history: three values published, confirmed, delivered
// once and acked.
func base() []Op {
	return []Op{
		pub(1, "a", "0:1", 0), pub(1, "b", "0:2", 2), pub(1, "c", "0:3", 4),
		del(2, "a", "0:1", "h.a.1", 10), del(2, "b", "0:2", "h.b.1", 10), del(2, "c", "0:3", "h.c.1", 10),
		settle(Ack, 2, "a", "h.a.1", 12, OK), settle(Ack, 2, "b", "h.b.1", 12, OK), settle(Ack, 2, "c", "h.c.1", 12, OK),
		done(100),
	}
}

// without returns ops minus those matching drop.
func without(ops []Op, drop func(Op) bool) []Op {
	var out []Op
	for _, op := range ops {
		if !drop(op) {
			out = append(out, op)
		}
	}
	return out
}

func value(v string) func(Op) bool {
	return func(op Op) bool { return op.Value == v && op.Kind != Publish }
}

func TestCheckCategories(t *testing.T) {
	cfg := Config{DeadLetterTopic: "dlq"}
	cases := []struct {
		name string
		ops  []Op
		want map[string]int // categories expected non-zero; every other must be 0
		lost [3]int         // prefix, middle, suffix
	}{
		{name: "clean", ops: base()},
		{name: "lost middle", ops: without(base(), value("b")), want: map[string]int{Lost: 1}, lost: [3]int{0, 1, 0}},
		{name: "lost prefix", ops: without(base(), value("a")), want: map[string]int{Lost: 1}, lost: [3]int{1, 0, 0}},
		{name: "lost suffix", ops: without(without(base(), value("b")), value("c")), want: map[string]int{Lost: 2}, lost: [3]int{0, 0, 2}},
		{name: "unconfirmed and never delivered is not lost",
			ops: append(base(), pub(1, "d", "", 6))},
		{name: "dead-lettered is neither lost nor unsettled",
			ops: append(without(base(), func(op Op) bool { return op.Kind == Ack && op.Value == "b" }),
				settle(Reject, 2, "b", "h.b.1", 12, OK),
				Op{Kind: Deliver, Proc: 3, Topic: "dlq", Group: "d", Value: "b", Pos: "0:1", Handle: "x", Outcome: OK})},
		{name: "unexpected", ops: append(base(), del(2, "zz", "0:9", "h.zz.1", 20), settle(Ack, 2, "zz", "h.zz.1", 22, OK)),
			want: map[string]int{Unexpected: 1}},
		{name: "unexpected in the dead-letter topic",
			ops:  append(base(), Op{Kind: Deliver, Proc: 3, Topic: "dlq", Group: "d", Value: "ghost", Pos: "0:1", Handle: "x", Outcome: OK}),
			want: map[string]int{Unexpected: 1}},
		{name: "duplicated store", ops: append(base(), del(2, "a", "0:7", "h.a.7", 20), settle(Ack, 2, "a", "h.a.7", 22, OK)),
			want: map[string]int{Duplicated: 1, AckedRedelivered: 1}},
		{name: "acked then redelivered", ops: append(base(), del(4, "b", "0:2", "h.b.2", 30), settle(Ack, 4, "b", "h.b.2", 32, OK)),
			want: map[string]int{AckedRedelivered: 1}},
		{name: "rejected then redelivered",
			ops: append(without(base(), func(op Op) bool { return op.Kind == Ack && op.Value == "b" }),
				settle(Reject, 2, "b", "h.b.1", 12, OK), del(4, "b", "0:2", "h.b.2", 30), settle(Ack, 4, "b", "h.b.2", 32, OK)),
			want: map[string]int{AckedRedelivered: 1}},
		{name: "redelivery overlapping the ack answer is not judged",
			ops: append(base(), del(4, "b", "0:2", "h.b.2", 12), settle(Ack, 4, "b", "h.b.2", 20, OK))},
		{name: "delivery inside another holder's lease",
			ops: append(without(base(), func(op Op) bool { return op.Kind == Ack && op.Value == "c" }),
				del(4, "c", "0:3", "h.c.2", 200), settle(Ack, 4, "c", "h.c.2", 300, OK)),
			want: map[string]int{LeaseViolation: 1}},
		{name: "delivery after the lease ended is fine",
			ops: append(without(base(), func(op Op) bool { return op.Kind == Ack && op.Value == "c" }),
				del(4, "c", "0:3", "h.c.2", 1020), settle(Ack, 4, "c", "h.c.2", 1030, OK))},
		{name: "an extend answered +OK keeps the lease",
			ops: append(without(base(), func(op Op) bool { return op.Kind == Ack && op.Value == "c" }),
				Op{Kind: Extend, Proc: 2, Group: "g", Value: "c", Handle: "h.c.1", LeaseMs: 5000, Outcome: OK, Invoke: 500 * msec, Complete: 501 * msec},
				del(4, "c", "0:3", "h.c.2", 2000), settle(Ack, 4, "c", "h.c.2", 2010, OK)),
			want: map[string]int{LeaseViolation: 1}},
		{name: "a nack before the redelivery ends the lease",
			ops: append(without(base(), func(op Op) bool { return op.Kind == Ack && op.Value == "c" }),
				settle(Nack, 2, "c", "h.c.1", 100, OK), del(4, "c", "0:3", "h.c.2", 200), settle(Ack, 4, "c", "h.c.2", 300, OK))},
		{name: "the holder's connection closing hands the lease back",
			ops: append(without(base(), func(op Op) bool { return op.Kind == Ack && op.Value == "c" }),
				Op{Kind: Close, Proc: 2, Outcome: OK, Invoke: 50 * msec, Complete: 60 * msec},
				del(4, "c", "0:3", "h.c.2", 200), settle(Ack, 4, "c", "h.c.2", 300, OK))},
		{name: "another client's connection closing does not",
			ops: append(without(base(), func(op Op) bool { return op.Kind == Ack && op.Value == "c" }),
				Op{Kind: Close, Proc: 7, Outcome: OK, Invoke: 50 * msec, Complete: 60 * msec},
				del(4, "c", "0:3", "h.c.2", 200), settle(Ack, 4, "c", "h.c.2", 300, OK)),
			want: map[string]int{LeaseViolation: 1}},
		{name: "a restart in between voids the lease",
			ops: append(without(base(), func(op Op) bool { return op.Kind == Ack && op.Value == "c" }),
				Op{Kind: Fault, Proc: -1, Node: "n1", Fault: FaultRestart, Outcome: OK, Invoke: 50 * msec, Complete: 60 * msec},
				del(4, "c", "0:3", "h.c.2", 200), settle(Ack, 4, "c", "h.c.2", 300, OK))},
		{name: "the node's clock stepped forward an hour expires the lease",
			ops: append(without(base(), func(op Op) bool { return op.Kind == Ack && op.Value == "c" }),
				Op{Kind: Fault, Proc: -1, Node: "n1", Fault: FaultClock, OffsetMs: 3600_000, Outcome: OK, Invoke: 50 * msec, Complete: 60 * msec},
				del(4, "c", "0:3", "h.c.2", 200), settle(Ack, 4, "c", "h.c.2", 300, OK))},
		{name: "the node's clock stepped back an hour: the lease still ends by real time",
			ops: append(without(base(), func(op Op) bool { return op.Kind == Ack && op.Value == "c" }),
				Op{Kind: Fault, Proc: -1, Node: "n1", Fault: FaultClock, OffsetMs: 3600_000, Outcome: OK, Invoke: 1 * msec, Complete: 2 * msec},
				Op{Kind: Fault, Proc: -1, Node: "n1", Fault: FaultClock, OffsetMs: 0, Outcome: OK, Invoke: 500 * msec, Complete: 510 * msec},
				del(4, "c", "0:3", "h.c.2", 1020), settle(Ack, 4, "c", "h.c.2", 1030, OK))},
		{name: "under a steady offset the lease still holds",
			ops: append(without(base(), func(op Op) bool { return op.Kind == Ack && op.Value == "c" }),
				Op{Kind: Fault, Proc: -1, Node: "n1", Fault: FaultClock, OffsetMs: 3600_000, Outcome: OK, Invoke: 1 * msec, Complete: 2 * msec},
				del(4, "c", "0:3", "h.c.2", 200), settle(Ack, 4, "c", "h.c.2", 300, OK)),
			want: map[string]int{LeaseViolation: 1}},
		{name: "split brain", ops: append(base(), pub(5, "e", "0:2", 40), del(2, "e", "0:2", "h.e.1", 50), settle(Ack, 2, "e", "h.e.1", 52, OK)),
			want: map[string]int{SplitBrain: 1}},
		{name: "unsettled", ops: without(base(), func(op Op) bool { return op.Kind == Ack && op.Value == "a" }),
			want: map[string]int{Unsettled: 1}},
		{name: "an ack with no answer may have settled",
			ops: append(without(base(), func(op Op) bool { return op.Kind == Ack && op.Value == "a" }), settle(Ack, 2, "a", "h.a.1", 12, Info))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.ops, cfg)
			for _, cat := range Categories() {
				if got := r.N(cat); got != tc.want[cat] {
					var b bytes.Buffer
					_ = r.WriteTable(&b)
					t.Errorf("%s = %d, want %d\n%s", cat, got, tc.want[cat], b.String())
				}
			}
			if got := [3]int{r.LostPrefix, r.LostMiddle, r.LostSuffix}; got != tc.lost {
				t.Errorf("lost prefix/middle/suffix = %v, want %v", got, tc.lost)
			}
			if r.Valid() != (len(tc.want) == 0) {
				t.Errorf("Valid() = %v with %v", r.Valid(), tc.want)
			}
		})
	}
}

func TestCheckIncompleteHistoryIsNotValid(t *testing.T) {
	ops := without(base(), func(op Op) bool { return op.Kind == Phase })
	ops = without(ops, value("b")) // lost, but there was no final drain to prove it
	r := Check(ops, Config{})
	if !r.Incomplete || r.Valid() || r.N(Lost) != 0 {
		t.Fatalf("incomplete=%v valid=%v lost=%d", r.Incomplete, r.Valid(), r.N(Lost))
	}
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil || !strings.Contains(b.String(), "INCOMPLETE") {
		t.Fatalf("table: %v\n%s", err, b.String())
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range base() {
		if err := w.Add(op); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ops, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != len(base()) || ops[3] != base()[3] {
		t.Fatalf("read back %d ops: %+v", len(ops), ops)
	}
	if _, err := Read(strings.NewReader("{\"op\":\"publish\"}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("malformed line: %v", err)
	}
}
