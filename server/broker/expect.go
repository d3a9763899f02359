package broker

// Conditional publishes (SPEC.md 7.6, JetStream's Nats-Expected-* headers,
// 16.2). A publish may carry conditions on the state of the partition it
// is routed to (Message.Expect, Message.ExpectLastMsgID). The actor checks
// them in its round, after the duplicate check and before the append, in
// log order: every publish of the round sees the records the publishes
// before it in the round will append, so of two racing publishers
// expecting the same state one passes and the other fails. A publish that
// fails is answered with its error and nothing is stored. On a replicated
// partition the actor that appends is the one on the serving node (the
// leader), so the check holds in the replicated log's order; a new leader
// rebuilds what it checks against from its logs (role.go).
//
// Expect.Stream is checked when the publish is prepared: the topic's name
// never changes. Expect.LastSeq is checked against the partition's last
// offset, which the actor always knows.
//
// Expect.SubjectSeq needs the last offset of each subject: subjectIndex,
// in the actor's memory, built at the first publish that needs it since
// the partition was opened or became served here, by a scan of the last
// subjectScanMax records of the data log (every record's subject is in
// its meta), and kept up to date with every append from then on. It is
// bounded: at most subjectIndexMax subjects; at the bound the subject
// whose last record is the oldest is forgotten and the index's floor
// rises to that record. A subject the index does not hold has no record
// after the floor: when the floor is below the partition's first
// retained record the subject has none at all (last offset 0); otherwise
// its last offset is not known and the publish fails with
// ErrSubjectUnknown rather than being checked against a guess. Nothing
// of the index is on disk: the data log is the record, so after a
// restart or a power cut the scan finds every confirmed record again.
//
// Cost: the scan reads up to subjectScanMax records once per open or
// leadership (the actor does nothing else meanwhile, as for the duplicate
// ids); after it, each append of a topic that uses the check costs one
// map update, and the index holds at most subjectIndexMax subjects (about
// 100 bytes each plus the subject).

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/fibrilmq/fibril/server/seglog"
)

const (
	// subjectIndexMax bounds the subjects a partition's subjectIndex holds.
	subjectIndexMax = 100_000
	// subjectScanMax bounds the records the index is built from.
	subjectScanMax = 1 << 20
)

// Expect is a publish's conditions on the partition it is routed to; the
// zero Expect has none. Offsets start at 1; 0 means "no record".
type Expect struct {
	// Stream, when not empty, must be the topic's name
	// (Nats-Expected-Stream), else ErrStreamMismatch.
	Stream string
	// LastSeq, when HasLastSeq, must be the offset of the partition's last
	// record (0: it has none yet) (Nats-Expected-Last-Sequence), else a
	// *LastSeqError.
	LastSeq    Seq
	HasLastSeq bool
	// SubjectSeq, when HasSubjectSeq, must be the offset of the last
	// record the partition holds with the publish's subject (0: none)
	// (Nats-Expected-Last-Subject-Sequence), else a *LastSeqError with
	// Subject set, or ErrSubjectUnknown when the partition cannot tell.
	SubjectSeq    Seq
	HasSubjectSeq bool
}

var (
	// ErrStreamMismatch: Expect.Stream is not the topic's name.
	ErrStreamMismatch = errors.New("broker: expected stream does not match")
	// ErrWrongLastSeq: Expect.LastSeq or Expect.SubjectSeq is not the
	// partition's; nothing is stored. The error is a *LastSeqError.
	ErrWrongLastSeq = errors.New("broker: wrong last sequence")
	// ErrSubjectUnknown: the partition's subject index is at its bound and
	// no longer knows the last offset of the publish's subject; nothing is
	// stored.
	ErrSubjectUnknown = errors.New("broker: last sequence of the subject is not known")
)

// LastSeqError is the ErrWrongLastSeq of one publish: Last is the
// partition's last offset (of the publish's subject when Subject).
type LastSeqError struct {
	Last    Seq
	Subject bool
}

func (e *LastSeqError) Error() string {
	return "broker: wrong last sequence: " + strconv.FormatUint(uint64(e.Last), 10)
}

// Is makes errors.Is(err, ErrWrongLastSeq) hold.
func (e *LastSeqError) Is(target error) bool { return target == ErrWrongLastSeq }

// checkStream checks Expect.Stream when a publish is prepared.
func (t *Topic) checkStream(e *Expect) error {
	if e != nil && e.Stream != "" && e.Stream != string(t.name) {
		return fmt.Errorf("publish to %s: %w: expected %q", t.name, ErrStreamMismatch, e.Stream)
	}
	return nil
}

// subjectRec is a subject's last offset when it was noted; live while the
// index's map still names that offset.
type subjectRec struct {
	subject string
	seq     Seq
}

// subjectIndex (actor) is the last offset of each subject of a
// partition's recent records; see the file comment. A pure structure;
// the partition glue below feeds it.
type subjectIndex struct {
	loaded bool
	max    int
	last   map[string]Seq
	fifo   []subjectRec // in offset order; live from head on
	head   int
	// floor: every subject with a record after floor is in last.
	floor Seq
	// noted: the round being written noted its publishes already.
	noted bool
}

func newSubjectIndex(max int) subjectIndex {
	return subjectIndex{loaded: true, max: max, last: map[string]Seq{}}
}

// note records seq as subject's last offset (offsets grow).
func (x *subjectIndex) note(subject string, seq Seq) {
	x.last[subject] = seq
	x.fifo = append(x.fifo, subjectRec{subject: subject, seq: seq})
	for len(x.last) > x.max {
		r := x.fifo[x.head]
		x.fifo[x.head] = subjectRec{}
		x.head++
		if s, ok := x.last[r.subject]; ok && s == r.seq {
			delete(x.last, r.subject)
			x.floor = max(x.floor, r.seq)
		}
	}
	// Drop the records no longer live once they outnumber the live ones.
	if n := len(x.fifo) - x.head; n > 64 && n > 2*len(x.last) {
		live := x.fifo[:0]
		for _, r := range x.fifo[x.head:] {
			if s, ok := x.last[r.subject]; ok && s == r.seq {
				live = append(live, r)
			}
		}
		clear(x.fifo[len(live):])
		x.fifo, x.head = live, 0
	}
}

// lookup returns subject's last offset among the records from first on
// (0: none), or ok false when the index cannot tell.
func (x *subjectIndex) lookup(subject string, first Seq) (Seq, bool) {
	if s, ok := x.last[subject]; ok {
		if s >= first {
			return s, true
		}
		return 0, true // the record was deleted by retention or a purge
	}
	if x.floor < first {
		return 0, true
	}
	return 0, false
}

// loadSubjects builds the index from the data log's last subjectScanMax
// records. A record that cannot be read raises the floor past it: its
// subject is then not known rather than wrong.
func (p *partition) loadSubjects() {
	x := &p.subjects
	*x = newSubjectIndex(subjectIndexMax)
	first, last := p.data.Bounds()
	if first > last {
		return
	}
	from := first
	if last-first >= subjectScanMax {
		from = last - subjectScanMax + 1
		x.floor = from - 1
	}
	var bad error
	for at := from; at <= last; {
		was := at
		err := p.data.Scan(at, 1<<20, func(r seglog.Record) bool {
			_, subject, err := decodeMetaReuse(r.Meta, p.lastSubject)
			if err != nil {
				x.floor = max(x.floor, r.Seq)
				bad = fmt.Errorf("record %d: %w", r.Seq, err)
			} else {
				x.note(subject, r.Seq)
			}
			at = r.Seq + 1
			return true
		})
		if err != nil && at == was {
			x.floor = max(x.floor, at) // the record that cannot be read
			bad = fmt.Errorf("record %d: %w", at, err)
			at++
		}
	}
	if bad != nil {
		p.t.b.logf("topic %s partition %d: subject index: %v", p.t.name, p.idx, bad)
	}
}

// checkExpect (actor, in takeDuplicates' loop) checks c's conditions
// against the partition as the round's earlier kept publishes (ahead of
// them) leave it.
func (p *partition) checkExpect(c *command, ahead int) error {
	e := c.expect
	if e == nil {
		return nil
	}
	last := p.last + Seq(ahead)
	if e.HasLastSeq && e.LastSeq != last {
		return fmt.Errorf("publish to %s partition %d: %w", p.t.name, p.idx, &LastSeqError{Last: last})
	}
	if e.HasSubjectSeq {
		s, ok := p.subjects.lookup(c.subject, p.readFrom()) // purged records are gone
		if !ok {
			return fmt.Errorf("publish to %s partition %d: %w: %q (more than %d subjects)", p.t.name, p.idx, ErrSubjectUnknown, c.subject, subjectIndexMax)
		}
		if s != e.SubjectSeq {
			return fmt.Errorf("publish to %s partition %d: %w", p.t.name, p.idx, &LastSeqError{Last: s, Subject: true})
		}
	}
	return nil
}

// needsSubjects reports whether a publish of the round checks a subject's
// last offset.
func needsSubjects(pubs []*command) bool {
	for _, c := range pubs {
		if c.expect != nil && c.expect.HasSubjectSeq {
			return true
		}
	}
	return false
}

// notedKept (takeDuplicates' loop) notes a kept publish in the subject
// index at the offset it will get, so later publishes of the round see it.
func (p *partition) notedKept(c *command, ahead int) {
	if p.subjects.loaded {
		p.subjects.note(c.subject, p.last+1+Seq(ahead))
		p.subjects.noted = true
	}
}

// appendedSubjects (appendData, after the append) notes the round's
// records in the subject index, or drops the index when the append
// failed or the offsets are not those the round's checks assumed.
func (p *partition) appendedSubjects(first Seq, err error) {
	x := &p.subjects
	if !x.loaded {
		return
	}
	noted := x.noted
	x.noted = false
	if err != nil || first != p.last+1 {
		*x = subjectIndex{} // rebuilt from the log at its next use
		return
	}
	if noted {
		return
	}
	for i, c := range p.in.pubs {
		x.note(c.subject, first+Seq(i))
	}
}
