package history

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// modelHistory is the history of a correct single-partition broker driven
// by rng: publishes (some unanswered), polls, acks, nacks with delays,
// rejects to the dead-letter topic, extends, leases expiring, consumers
// closing their connections, restarts that drop every lease, and clock
// steps that do not touch leases (they run on elapsed time). Times are
// milliseconds.
func modelHistory(rng *rand.Rand) []Op {
	const lease = 100
	type msg struct {
		value          string
		seq, attempt   int
		readyAt        int64
		holder         int // consumer proc, 0 when not leased
		leaseEnd       int64
		handle         string
		acked, dead    bool
		deliveredSoFar int
	}
	var (
		ops   []Op
		t     int64
		seq   int
		msgs  []*msg
		dlq   []string
		pubN  = map[int]int{}
		clock int64
	)
	at := func(ms int64) int64 { return ms * msec }
	add := func(op Op) { ops = append(ops, op) }
	add(Op{Kind: Phase, Proc: -1, Value: PhaseStart, DeadLetter: "dlq", Outcome: OK})
	expire := func() {
		for _, m := range msgs {
			if m.holder != 0 && t >= m.leaseEnd {
				m.holder, m.readyAt = 0, t
			}
		}
	}
	poll := func(proc int, drain bool) int {
		expire()
		inv := t
		t++
		got := 0
		for _, m := range msgs {
			if got == 3 || m.acked || m.dead || m.holder != 0 || m.readyAt > inv {
				continue
			}
			m.attempt++
			m.holder, m.leaseEnd = proc, inv+lease
			m.handle = fmt.Sprintf("h.%d.%d", m.seq, m.attempt)
			add(Op{Kind: Deliver, Proc: proc, Topic: "t", Group: "g", Value: m.value, Pos: fmt.Sprintf("0:%d", m.seq),
				Handle: m.handle, Attempt: m.attempt, LeaseMs: lease, Outcome: OK, Invoke: at(inv), Complete: at(t)})
			got++
			// Settle now, later (by lease expiry), or not at all.
			r := rng.IntN(100)
			if drain {
				r = 0
			}
			st := Op{Proc: proc, Topic: "t", Group: "g", Value: m.value, Handle: m.handle, Outcome: OK, Invoke: at(t), Complete: at(t + 1)}
			switch {
			case r < 70:
				st.Kind, m.acked, m.holder = Ack, true, 0
			case r < 80:
				st.Kind, m.holder, m.readyAt = Nack, 0, t+int64(rng.IntN(50))
			case r < 85:
				st.Kind, m.dead, m.holder = Reject, true, 0
				dlq = append(dlq, m.value)
			case r < 90:
				st.Kind, st.LeaseMs, m.leaseEnd = Extend, lease, t+lease
			default:
				continue // left to expire
			}
			add(st)
			t++
		}
		return got
	}
	steps := 50 + rng.IntN(200)
	for range steps {
		t += 1 + int64(rng.IntN(20))
		switch r := rng.IntN(100); {
		case r < 45:
			p := 1 + rng.IntN(2)
			v := fmt.Sprintf("p%d-%d", p, pubN[p])
			pubN[p]++
			op := Op{Kind: Publish, Proc: p, Topic: "t", Value: v, Invoke: at(t), Complete: at(t + 1)}
			switch stored := rng.IntN(10); {
			case stored < 8:
				seq++
				op.Outcome, op.Pos = OK, fmt.Sprintf("0:%d", seq)
				msgs = append(msgs, &msg{value: v, seq: seq, readyAt: t + 1})
			case stored < 9: // stored, answer lost
				seq++
				op.Outcome = Info
				msgs = append(msgs, &msg{value: v, seq: seq, readyAt: t + 1})
			default: // refused
				op.Outcome = Fail
			}
			add(op)
		case r < 85:
			poll(3+rng.IntN(2), false)
		case r < 90: // a consumer's connection ends: its leases go back
			proc := 3 + rng.IntN(2)
			add(Op{Kind: Close, Proc: proc, Outcome: OK, Invoke: at(t), Complete: at(t + 1)})
			for _, m := range msgs {
				if m.holder == proc {
					m.holder, m.readyAt = 0, t
				}
			}
		case r < 95: // restart: every lease gone
			add(Op{Kind: Fault, Proc: -1, Node: "n1", Fault: FaultRestart, Outcome: OK, Invoke: at(t), Complete: at(t + 5)})
			t += 5
			for _, m := range msgs {
				if m.holder != 0 {
					m.holder, m.readyAt = 0, t
				}
			}
		default: // a clock step: leases keep running on elapsed time
			clock = []int64{0, 3_600_000, -3_600_000}[rng.IntN(3)]
			add(Op{Kind: Fault, Proc: -1, Node: "n1", Fault: FaultClock, OffsetMs: clock, Outcome: OK, Invoke: at(t), Complete: at(t + 2)})
			t += 2
		}
	}
	add(Op{Kind: Phase, Proc: -1, Value: PhaseDrain, Outcome: OK, Invoke: at(t), Complete: at(t)})
	for range 1000 {
		t += lease + 1
		if poll(200, true) == 0 {
			done := true
			for _, m := range msgs {
				done = done && (m.acked || m.dead)
			}
			if done {
				break
			}
		}
	}
	for i, v := range dlq {
		t++
		add(Op{Kind: Deliver, Proc: 201, Topic: "dlq", Group: "d", Value: v, Pos: fmt.Sprintf("0:%d", i+1),
			Handle: fmt.Sprintf("d.%d", i), Attempt: 1, LeaseMs: lease, Outcome: OK, Invoke: at(t), Complete: at(t + 1)})
	}
	add(Op{Kind: Phase, Proc: -1, Value: PhaseDone, Outcome: OK, Invoke: at(t + 2), Complete: at(t + 2)})
	return ops
}

// TestCheckModelHistoriesAreValid: histories of a correct broker, with
// every excuse the checker knows (unanswered publishes, nacks, rejects,
// expiries, closes, restarts, clock steps), are never judged invalid.
func TestCheckModelHistoriesAreValid(t *testing.T) {
	for seed := range uint64(300) {
		ops := modelHistory(rand.New(rand.NewPCG(seed, 7)))
		if r := Check(ops, Config{}); !r.Valid() {
			t.Fatalf("seed %d: a correct broker's history judged invalid: %s\n%v", seed, r.Summary(), r.Counts)
		}
	}
}

// TestCheckModelHistoriesWithOneDroppedDelivery: removing the only
// delivery of an acked, confirmed value from a correct history makes it
// lost; so the model test above can fail.
func TestCheckModelHistoriesWithOneDroppedDelivery(t *testing.T) {
	found := 0
	for seed := range uint64(100) {
		ops := modelHistory(rand.New(rand.NewPCG(seed, 7)))
		count := map[string]int{}
		confirmed := map[string]bool{}
		for _, op := range ops {
			switch {
			case op.Kind == Deliver && op.Topic == "t":
				count[op.Value]++
			case op.Kind == Publish && op.Outcome == OK:
				confirmed[op.Value] = true
			}
		}
		victim := ""
		for _, op := range ops {
			if op.Kind == Deliver && op.Topic == "t" && count[op.Value] == 1 && confirmed[op.Value] {
				victim = op.Value
				break
			}
		}
		if victim == "" {
			continue
		}
		found++
		r := Check(without(ops, func(op Op) bool { return op.Value == victim && op.Kind != Publish }), Config{})
		if r.N(Lost) != 1 || r.Valid() {
			t.Fatalf("seed %d: dropping %q's only delivery: %s", seed, victim, r.Summary())
		}
	}
	if found < 50 {
		t.Fatalf("only %d histories had a value delivered once", found)
	}
}
