package history

import (
	"fmt"
	"sort"
)

// Categories of violation, in the order the table shows them.
const (
	// Lost: confirmed, and never delivered to some group (nor dead-lettered)
	// by the end of the final drain.
	Lost = "lost"
	// Unexpected: delivered, but never published by anyone.
	Unexpected = "unexpected"
	// Duplicated: one published value stored at two or more positions.
	Duplicated = "duplicated"
	// AckedRedelivered: an ACK (or REJECT) answered +OK, then the same value
	// delivered again to the same group by a poll invoked after the answer.
	AckedRedelivered = "acked-redelivered"
	// LeaseViolation: a delivery made while an earlier delivery of the same
	// value to the same group still surely held its lease.
	LeaseViolation = "lease-violation"
	// SplitBrain: two different values at one partition:seq of a topic.
	SplitBrain = "split-brain"
	// Unsettled: delivered to a group, and ending neither acked there nor
	// dead-lettered.
	Unsettled = "unsettled"
)

// Categories returns every category, in table order.
func Categories() []string {
	return []string{Lost, Unexpected, Duplicated, AckedRedelivered, LeaseViolation, SplitBrain, Unsettled}
}

// Config says how to read a history.
type Config struct {
	// DeadLetterTopic is the topic dead letters go to; a value delivered
	// from it counts as dead-lettered. Deliveries from every other topic
	// are the main topic's.
	// Default: the DeadLetter of the history's "start" phase.
	DeadLetterTopic string
	// LeasesSurviveRestart makes a node restart no excuse for a delivery
	// inside an earlier lease (a replicated cluster promises that; a single
	// node does not persist leases).
	LeasesSurviveRestart bool
	// Examples is how many examples each category keeps (default 5).
	Examples int
}

// Count is one category's tally.
type Count struct {
	Name     string
	N        int
	Examples []string // the first few, human-readable
}

// Result is a checker's verdict on one history.
type Result struct {
	Ops          int
	Published    int // publish ops
	Confirmed    int // publishes answered ok
	Delivered    int // deliveries from the main topic
	Acked        int // acks answered ok
	DeadLettered int // distinct values seen in the dead-letter topic
	// LostPrefix, LostMiddle and LostSuffix split Lost per producer: lost
	// values before that producer's first surviving confirmed value, between
	// survivors, and after its last (all of a producer's values lost count
	// as suffix).
	LostPrefix, LostMiddle, LostSuffix int
	// Faults counts fault ops by kind.
	Faults map[string]int
	// Incomplete is set when the history has no "done" phase: loss and
	// settlement cannot be judged and the result is not valid.
	Incomplete bool
	Counts     []Count // one per category, in Categories order
}

// N returns the count of category name.
func (r *Result) N(name string) int {
	for _, c := range r.Counts {
		if c.Name == name {
			return c.N
		}
	}
	return 0
}

// Valid reports whether the history is complete and every category is 0.
func (r *Result) Valid() bool {
	if r.Incomplete {
		return false
	}
	for _, c := range r.Counts {
		if c.N > 0 {
			return false
		}
	}
	return true
}

type groupValue struct{ group, value string }

// checker holds the indexes one Check builds over the ops.
type checker struct {
	cfg      Config
	res      *Result
	counts   map[string]*Count
	pubs     map[string][]*Op          // value -> its publish ops
	dels     map[groupValue][]*Op      // main-topic deliveries, by group and value
	settles  map[string][]*Op          // handle -> ack/nack/reject ops
	extends  map[string][]*Op          // handle -> extend ops answered ok
	acked    map[groupValue]int64      // earliest ok ack/reject answer per group and value
	maybeAck map[groupValue]bool       // an ack or reject that may have taken effect
	dead     map[string]bool           // values seen in the dead-letter topic
	groups   map[string]bool           // groups with main-topic deliveries
	clocks   []*Op                     // clock faults, by Invoke
	restarts []*Op                     // restart faults
	closes   map[int][]*Op             // proc -> its connection closes
	posVals  map[string]map[string]int // topic/pos -> value -> first op index
	valPos   map[string]map[string]int // value -> main-topic pos -> first op index
}

// Check judges ops (in any order) under cfg.
func Check(ops []Op, cfg Config) *Result {
	if cfg.Examples == 0 {
		cfg.Examples = 5
	}
	for _, op := range ops {
		if op.Kind == Phase && op.Value == PhaseStart {
			if cfg.DeadLetterTopic == "" {
				cfg.DeadLetterTopic = op.DeadLetter
			}
		}
	}
	c := &checker{
		cfg: cfg, res: &Result{Ops: len(ops), Faults: map[string]int{}},
		counts: map[string]*Count{}, pubs: map[string][]*Op{}, dels: map[groupValue][]*Op{},
		settles: map[string][]*Op{}, extends: map[string][]*Op{}, acked: map[groupValue]int64{},
		maybeAck: map[groupValue]bool{}, dead: map[string]bool{}, groups: map[string]bool{},
		posVals: map[string]map[string]int{}, valPos: map[string]map[string]int{}, closes: map[int][]*Op{},
	}
	for _, name := range Categories() {
		c.counts[name] = &Count{Name: name}
	}
	c.index(ops)
	c.checkUnexpected()
	c.checkPositions()
	c.checkAckedRedelivered()
	c.checkLeases()
	if !c.res.Incomplete {
		c.checkLostAndUnsettled()
	}
	for _, name := range Categories() {
		c.res.Counts = append(c.res.Counts, *c.counts[name])
	}
	return c.res
}

func (c *checker) report(cat, format string, args ...any) {
	k := c.counts[cat]
	k.N++
	if len(k.Examples) < c.cfg.Examples {
		k.Examples = append(k.Examples, fmt.Sprintf(format, args...))
	}
}

func (c *checker) main(op *Op) bool {
	return op.Topic != c.cfg.DeadLetterTopic || c.cfg.DeadLetterTopic == ""
}

func (c *checker) index(ops []Op) {
	done := false
	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case Publish:
			c.res.Published++
			c.pubs[op.Value] = append(c.pubs[op.Value], op)
			if op.Outcome == OK {
				c.res.Confirmed++
				if op.Pos != "" {
					c.position(op.Topic, op.Pos, op.Value, i)
				}
			}
		case Deliver:
			if !c.main(op) {
				c.dead[op.Value] = true
				continue
			}
			c.res.Delivered++
			gv := groupValue{op.Group, op.Value}
			c.dels[gv] = append(c.dels[gv], op)
			c.groups[op.Group] = true
			if op.Pos != "" {
				c.position(op.Topic, op.Pos, op.Value, i)
			}
		case Ack, Nack, Reject:
			if !c.main(op) {
				continue
			}
			c.settles[op.Handle] = append(c.settles[op.Handle], op)
			if op.Kind == Nack {
				continue
			}
			gv := groupValue{op.Group, op.Value}
			switch op.Outcome {
			case OK:
				if op.Kind == Ack {
					c.res.Acked++
				}
				if t, ok := c.acked[gv]; !ok || op.Complete < t {
					c.acked[gv] = op.Complete
				}
				c.maybeAck[gv] = true
			case Info:
				c.maybeAck[gv] = true
			}
		case Extend:
			if op.Outcome == OK {
				c.extends[op.Handle] = append(c.extends[op.Handle], op)
			}
		case Close:
			c.closes[op.Proc] = append(c.closes[op.Proc], op)
		case Fault:
			c.res.Faults[op.Fault]++
			switch op.Fault {
			case FaultClock:
				c.clocks = append(c.clocks, op)
			case FaultRestart:
				c.restarts = append(c.restarts, op)
			}
		case Phase:
			if op.Value == PhaseDone {
				done = true
			}
		}
	}
	c.res.DeadLettered = len(c.dead)
	c.res.Incomplete = !done
	sort.Slice(c.clocks, func(i, j int) bool { return c.clocks[i].Invoke < c.clocks[j].Invoke })
	for _, list := range c.dels {
		sort.SliceStable(list, func(i, j int) bool { return list[i].Invoke < list[j].Invoke })
	}
}

// position records that value was seen at topic's pos (by a confirm or a
// delivery from the main topic).
func (c *checker) position(topic, pos, value string, i int) {
	key := topic + "/" + pos
	if c.posVals[key] == nil {
		c.posVals[key] = map[string]int{}
	}
	if _, ok := c.posVals[key][value]; !ok {
		c.posVals[key][value] = i
	}
	if c.valPos[value] == nil {
		c.valPos[value] = map[string]int{}
	}
	if _, ok := c.valPos[value][key]; !ok {
		c.valPos[value][key] = i
	}
}

func (c *checker) checkUnexpected() {
	seen := map[string]bool{}
	check := func(value, where string) {
		if _, ok := c.pubs[value]; ok || seen[value] {
			return
		}
		seen[value] = true
		c.report(Unexpected, "%q delivered from %s, never published", value, where)
	}
	for _, gv := range sortedKeys(c.dels) {
		check(gv.value, "group "+gv.group)
	}
	for _, v := range sortedSet(c.dead) {
		check(v, "the dead-letter topic")
	}
}

func (c *checker) checkPositions() {
	for _, v := range sortedKeys(c.valPos) {
		if ps := c.valPos[v]; len(ps) > 1 {
			c.report(Duplicated, "%q stored at %v", v, sortedKeys(ps))
		}
	}
	for _, p := range sortedKeys(c.posVals) {
		if vs := c.posVals[p]; len(vs) > 1 {
			c.report(SplitBrain, "%s holds %v", p, sortedKeys(vs))
		}
	}
}

func (c *checker) checkAckedRedelivered() {
	for _, gv := range sortedKeys(c.dels) {
		t, ok := c.acked[gv]
		if !ok {
			continue
		}
		for _, d := range c.dels[gv] {
			if d.Invoke > t {
				c.report(AckedRedelivered, "%q settled +OK in group %s at %d, delivered again (attempt %d, %s) by a poll invoked %s later",
					gv.value, gv.group, t, d.Attempt, d.Handle, ms(d.Invoke-t))
			}
		}
	}
}

// checkLeases finds deliveries d2 made while an earlier delivery d1 of the
// same value to the same group surely still held its lease: d1's lease ends
// no earlier than d1's invoke plus the lease, extended by every +OK extend;
// d2 was granted no later than its completion. A lease may be kept by the
// node's clock (then the offsets count: d1's lowest possible, d2's highest)
// or by elapsed real time (timers do not see clock steps); d2 counts only
// if it came before the lease's end by both. A settle of d1 invoked before
// d2 completed, the end of the connection d1 came on (its leases are
// handed back at once), or a node restart in between (leases are not
// persisted) excuses it.
func (c *checker) checkLeases() {
	for _, gv := range sortedKeys(c.dels) {
		list := c.dels[gv]
		for i, d1 := range list {
			if d1.LeaseMs <= 0 {
				continue
			}
			lo, _ := c.offsets(d1.Invoke, d1.Complete)
			end := d1.Invoke + (lo+d1.LeaseMs)*1e6 // by the node's clock
			realEnd := d1.Invoke + d1.LeaseMs*1e6  // by real time
			for _, e := range c.extends[d1.Handle] {
				elo, _ := c.offsets(e.Invoke, e.Complete)
				end = max(end, e.Invoke+(elo+e.LeaseMs)*1e6)
				realEnd = max(realEnd, e.Invoke+e.LeaseMs*1e6)
			}
			for _, d2 := range list[i+1:] {
				if d2.Handle == d1.Handle {
					continue
				}
				_, hi := c.offsets(d2.Invoke, d2.Complete)
				if d2.Complete+hi*1e6 >= end || d2.Complete >= realEnd || c.settledBefore(d1.Handle, d2.Complete) ||
					c.closedBetween(d1.Proc, d1.Invoke, d2.Complete) ||
					(!c.cfg.LeasesSurviveRestart && c.restartBetween(d1.Invoke, d2.Complete)) {
					continue
				}
				c.report(LeaseViolation, "%q in group %s: %s (proc %d) delivered while %s (proc %d) held its lease for %s more",
					gv.value, gv.group, d2.Handle, d2.Proc, d1.Handle, d1.Proc, ms(end-d2.Complete-hi*1e6))
			}
		}
	}
}

func (c *checker) settledBefore(handle string, t int64) bool {
	for _, s := range c.settles[handle] {
		if s.Invoke < t {
			return true
		}
	}
	return false
}

// closedBetween reports whether proc's connection may have ended between
// t0 and t1 (the server then hands its leases back at once).
func (c *checker) closedBetween(proc int, t0, t1 int64) bool {
	for _, cl := range c.closes[proc] {
		if cl.Complete > t0 && cl.Invoke < t1 {
			return true
		}
	}
	return false
}

func (c *checker) restartBetween(t0, t1 int64) bool {
	for _, r := range c.restarts {
		if r.Complete > t0 && r.Invoke < t1 {
			return true
		}
	}
	return false
}

// offsets returns the lowest and highest clock offset (ms) any node may
// have had at some instant of [t0, t1]: the offset in force at t0, and
// every offset set, or replaced, by a clock fault whose window overlaps the
// interval.
func (c *checker) offsets(t0, t1 int64) (lo, hi int64) {
	if len(c.clocks) == 0 {
		return 0, 0
	}
	inForce := map[string]int64{} // node -> offset set by the last clock op completed by t0
	before := map[string]int64{}  // node -> offset before the op at hand
	lo, hi = int64(1)<<62, -int64(1)<<62
	for _, k := range c.clocks {
		b := before[k.Node]
		before[k.Node] = k.OffsetMs
		if _, ok := inForce[k.Node]; !ok {
			inForce[k.Node] = 0 // every node starts at offset 0
		}
		if k.Complete <= t0 {
			inForce[k.Node] = k.OffsetMs
			continue
		}
		if k.Invoke <= t1 {
			lo, hi = min(lo, b, k.OffsetMs), max(hi, b, k.OffsetMs)
		}
	}
	for _, o := range inForce {
		lo, hi = min(lo, o), max(hi, o)
	}
	return lo, hi
}

func (c *checker) checkLostAndUnsettled() {
	groups := sortedSet(c.groups)
	type prod struct{ values []*Op }
	producers := map[int]*prod{}
	for _, v := range sortedKeys(c.pubs) {
		var conf *Op
		for _, p := range c.pubs[v] {
			if p.Outcome == OK {
				conf = p
				break
			}
		}
		if conf == nil {
			continue
		}
		pr := producers[conf.Proc]
		if pr == nil {
			pr = &prod{}
			producers[conf.Proc] = pr
		}
		pr.values = append(pr.values, conf)
	}
	// A value is lost for a group when it was confirmed and never reached
	// that group nor the dead-letter topic. With no group at all, nothing
	// was consumed and every confirmed value is lost.
	lost := func(v string) (string, bool) {
		if c.dead[v] {
			return "", false
		}
		if len(groups) == 0 {
			return "(no group consumed)", true
		}
		for _, g := range groups {
			if len(c.dels[groupValue{g, v}]) == 0 {
				return g, true
			}
		}
		return "", false
	}
	for _, proc := range sortedKeys(producers) {
		vals := producers[proc].values
		sort.Slice(vals, func(i, j int) bool { return vals[i].Invoke < vals[j].Invoke })
		first, last := -1, -1
		isLost := make([]bool, len(vals))
		for i, p := range vals {
			if _, l := lost(p.Value); l {
				isLost[i] = true
			} else {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		for i, p := range vals {
			if !isLost[i] {
				continue
			}
			g, _ := lost(p.Value)
			switch {
			case first < 0 || i > last:
				c.res.LostSuffix++
			case i < first:
				c.res.LostPrefix++
			default:
				c.res.LostMiddle++
			}
			c.report(Lost, "%q confirmed at %s by proc %d, never delivered to group %s", p.Value, p.Pos, proc, g)
		}
	}
	for _, gv := range sortedKeys(c.dels) {
		if c.maybeAck[gv] || c.dead[gv.value] {
			continue
		}
		c.report(Unsettled, "%q delivered to group %s %d times, never acked nor dead-lettered", gv.value, gv.group, len(c.dels[gv]))
	}
}
