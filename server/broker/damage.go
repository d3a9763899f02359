package broker

import (
	"errors"
	"fmt"

	"github.com/fibrilmq/fibril/server/seglog"
)

// Damaged records met while serving.
//
// Open verifies every stored record (seglog.Options.Verify), so damage
// found later was done while the broker ran (a disk fault, someone
// writing into the files) or escaped verification (a custom store). A
// delivery that finds its record damaged never settles it: the group
// stops in that partition before the damaged offset (groupState.stopAt),
// the stop is logged at ERROR once, counted, and shown by GroupInfo,
// Broker.Damaged and so by the admin listener's /readyz and metrics. It
// lasts until the partition is opened again, after an operator restored
// the file or ran fibril repair (which records what each group loses).

// DamageReport is a group stopped in a partition at a damaged record.
type DamageReport struct {
	Topic     TopicName `json:"topic"`
	Group     GroupName `json:"group"`
	Partition Partition `json:"partition"`
	// Seq is the damaged offset: the group is served nothing at or past
	// it in this partition.
	Seq Seq `json:"seq"`
	// Error says what the read found, naming the file and offset.
	Error string `json:"error"`
}

// stopAtDamage (actor) stops gp before seq, whose record could not be read.
func (p *partition) stopAtDamage(gp *groupPart, seq Seq, err error) {
	if err == nil {
		err = errors.New("unknown")
	}
	if !gp.stopAt(seq) {
		return
	}
	msg := err.Error()
	gp.stDamagedErr.Store(&msg)
	gp.stDamagedSeq.Store(uint64(seq))
	p.t.b.damagedStops.Add(1)
	what := "damaged record"
	if !errors.Is(err, seglog.ErrCorrupt) && !errors.Is(err, ErrCorruptState) {
		what = "unreadable record"
	}
	p.t.b.logf("ERROR topic %s partition %d group %s: offset %d is a %s; the group gets nothing at or past it in this partition until the data is restored or repaired (stop the server, run fibril verify, then fibril repair): %v",
		p.t.name, p.idx, gp.g.name, seq, what, err)
}

// Damaged lists the groups stopped at a damaged record, by topic, group
// and partition. It does not block.
func (b *Broker) Damaged() []DamageReport {
	if b.damagedStops.Load() == 0 {
		return nil
	}
	var out []DamageReport
	for _, t := range b.Topics() {
		for _, g := range t.Groups() {
			for i, gp := range g.parts {
				if gp == nil {
					continue
				}
				if seq := gp.stDamagedSeq.Load(); seq != 0 {
					r := DamageReport{Topic: t.name, Group: g.name, Partition: Partition(i), Seq: Seq(seq)}
					if e := gp.stDamagedErr.Load(); e != nil {
						r.Error = *e
					}
					out = append(out, r)
				}
			}
		}
	}
	return out
}

func (r DamageReport) String() string {
	return fmt.Sprintf("topic %s group %s partition %d: offset %d: %s", r.Topic, r.Group, r.Partition, r.Seq, r.Error)
}
