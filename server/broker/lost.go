package broker

import (
	"fmt"
	"path/filepath"

	"github.com/fibrilmq/fibril/server/seglog"
)

// Records lost to damage, as recorded by a repair.
//
// fibril repair opens a damaged data log with seglog.Options.SkipCorrupt:
// the damaged ranges become holes the log's indexes record, and every
// later Open lists them again (seglog.Recovery.Skipped, Recorded). A hole
// can never be delivered, and a delivery that met one would stop its group
// (damage.go); so when a partition opens, each group settles the offsets
// of the holes it had not settled yet ("dropped"), once, logged at WARN
// and listed by Broker.Losses: the loss is explicit, never silent.

// Loss is a range of offsets a group lost in one partition: records
// destroyed by damage that the group had not settled, settled without
// delivery when the partition opened after a repair.
type Loss struct {
	Topic     TopicName `json:"topic"`
	Group     GroupName `json:"group"`
	Partition Partition `json:"partition"`
	From      Seq       `json:"from"`
	To        Seq       `json:"to"`
	// Path is the segment file the records were lost from.
	Path string `json:"path"`
}

// String describes the loss for an operator.
func (l Loss) String() string {
	return fmt.Sprintf("topic %s group %s partition %d: offsets %d..%d (%d messages) from %s", l.Topic, l.Group, l.Partition, l.From, l.To, l.To-l.From+1, l.Path)
}

// recoverer is the part of a file log that says what its Open skipped.
type recoverer interface{ Recovery() seglog.Recovery }

// settleHoles (Open, with the groups' event sink attached) settles for
// every group the offsets of the data log's recorded holes it had not
// settled, and records what each group lost.
func (p *partition) settleHoles() {
	rl, ok := p.data.(recoverer)
	if !ok {
		return
	}
	for _, r := range rl.Recovery().Skipped {
		if r.From > r.To {
			continue
		}
		p.holes.add(r)
		for _, gp := range p.order {
			from := Seq(0)
			flush := func(to Seq) {
				if from == 0 {
					return
				}
				l := Loss{Topic: p.t.name, Group: gp.g.name, Partition: p.idx, From: from, To: to, Path: r.Path}
				p.t.b.losses = append(p.t.b.losses, l)
				p.t.b.logf("WARN %s: lost to damage (fibril repair recorded the range in %s): settled without delivery",
					l, filepath.Base(r.Path))
				from = 0
			}
			for seq := max(r.From, gp.frontier()); seq <= r.To && seq <= p.last; seq++ {
				if gp.acks.contains(seq) {
					flush(seq - 1)
					continue
				}
				gp.dropLost(seq)
				if from == 0 {
					from = seq
				}
			}
			flush(min(r.To, p.last))
		}
	}
}

// dropHole (actor) settles seq for gp if it lies in a recorded hole (a
// group created after the partition opened meets the holes when it gets
// there), logging the loss once per group and hole. It reports whether it
// did.
func (p *partition) dropHole(gp *groupPart, seq Seq) bool {
	r, ok := p.holes.find(seq)
	if !ok {
		return false
	}
	gp.dropLost(seq)
	if p.holes.firstLoss(gp.id, r) {
		p.t.b.logf("WARN topic %s group %s partition %d: offsets %d..%d were lost to damage (fibril repair recorded them in %s): settled without delivery",
			p.t.name, gp.g.name, p.idx, r.From, r.To, filepath.Base(r.Path))
	}
	return true
}

// holeSet is the ranges of a partition's data log lost to damage, as a
// repair recorded them (settleHoles lists them at Open), and which
// (group, hole) losses have been logged since.
type holeSet struct {
	ranges []seglog.SkippedRange
	logged map[[2]uint64]bool // at most maxLoggedHoles keys
}

// maxLoggedHoles bounds the (group, hole) pairs a holeSet remembers as
// logged; past it, further losses are settled without a log line.
const maxLoggedHoles = 4096

func (h *holeSet) add(r seglog.SkippedRange) { h.ranges = append(h.ranges, r) }

// find returns the hole that holds seq.
func (h *holeSet) find(seq Seq) (seglog.SkippedRange, bool) {
	for _, r := range h.ranges {
		if seq >= r.From && seq <= r.To {
			return r, true
		}
	}
	return seglog.SkippedRange{}, false
}

// firstLoss reports whether group g's loss of hole r is to be logged: the
// first time it is asked, while fewer than maxLoggedHoles are remembered.
func (h *holeSet) firstLoss(g GroupID, r seglog.SkippedRange) bool {
	key := [2]uint64{uint64(g), uint64(r.From)}
	if h.logged[key] || len(h.logged) >= maxLoggedHoles {
		return false
	}
	if h.logged == nil {
		h.logged = map[[2]uint64]bool{}
	}
	h.logged[key] = true
	return true
}

// Losses lists the ranges of offsets groups lost to damage when this
// broker opened (after fibril repair recorded them): settled without
// delivery. It is empty when nothing was lost.
func (b *Broker) Losses() []Loss { return append([]Loss(nil), b.losses...) }
