package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fibrilmq/fibril/server/seglog"
)

// TestRepairBringsBackARefusedDirectory damages a record of a sealed
// segment of a stopped broker: Open refuses naming the file and the
// sequence, Verify finds it (changing nothing), Repair quarantines a copy
// of the segment and lists exactly what each group loses (the record, for
// the groups that had not settled it), and the broker then opens and
// delivers every other message.
func TestRepairBringsBackARefusedDirectory(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("orders", TopicConfig{})
	ga := e.group(tp, "a", GroupConfig{DeadLetter: "-"})
	e.group(tp, "b", GroupConfig{DeadLetter: "-"})
	for i := 1; i <= 600; i++ {
		e.publish(tp, fmt.Sprintf("m%03d-%s", i, strings.Repeat("x", 100)))
	}
	for n := 0; n < 200; {
		for _, d := range e.pollNow(ga, 50, 0) {
			if err := e.settle(d, Ack()); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	dataDir := filepath.Join(tp.dir, "0", dataLogName)
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	e.b = nil
	for _, victim := range []Seq{150, 400} {
		path, off := recordOnDisk(t, dataDir, victim)
		flipByte(t, path, off)
	}
	_, err := Open(e.dir, e.opts())
	var ce *seglog.CorruptError
	if !errors.As(err, &ce) || ce.Seq != 150 || !IsDamage(err) {
		t.Fatalf("Open of a damaged directory: %v; want a refusal naming seq 150", err)
	}

	rep, err := Verify(e.dir, e.opts())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Worst() != FindingRecords || rep.Count(FindingRecords) != 2 {
		t.Fatalf("Verify: %+v", rep.Findings)
	}

	rr, err := Repair(e.dir, RepairOptions{Engine: e.opts()})
	if err != nil {
		t.Fatalf("Repair: %v\n%s", err, strings.Join(rr.Actions, "\n"))
	}
	want := []string{
		"topic orders group b partition 0: offsets 150..150",
		"topic orders group a partition 0: offsets 400..400",
		"topic orders group b partition 0: offsets 400..400",
	}
	var got []string
	for _, l := range rr.Losses {
		got = append(got, l.String()[:len(want[0])])
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("Losses:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if rr.After.Worst() > FindingNote {
		t.Fatalf("after the repair: %+v", rr.After.Findings)
	}
	if qs, _ := filepath.Glob(filepath.Join(rr.Quarantine, "topics", "1", "0", "data", "*.seg")); len(qs) == 0 {
		t.Fatalf("no copy of the damaged segment in %s", rr.Quarantine)
	}
	if _, err := os.Stat(filepath.Join(rr.Quarantine, "REPORT.json")); err != nil {
		t.Fatal(err)
	}

	e.open()
	if l := e.b.Losses(); len(l) != 0 {
		t.Fatalf("losses again at the next Open: %v", l)
	}
	tp, _ = e.b.Topic("orders")
	late := e.group(tp, "late", GroupConfig{DeadLetter: "-"}) // before retention runs
	for name, from := range map[GroupName]int{"a": 201, "b": 1} {
		g, _ := tp.Group(name, GroupConfig{})
		var n int
		for {
			ds := e.pollNow(g, 100, 0)
			if len(ds) == 0 {
				break
			}
			for _, d := range ds {
				if d.Handle.Seq == 150 || d.Handle.Seq == 400 {
					t.Fatalf("group %s got lost offset %d", name, d.Handle.Seq)
				}
				if err := e.settle(d, Ack()); err != nil {
					t.Fatal(err)
				}
				n++
			}
		}
		lost := 2
		if name == "a" {
			lost = 1
		}
		if n != 600-from+1-lost {
			t.Fatalf("group %s got %d messages after the repair, want %d; damaged %+v", name, n, 600-from+1-lost, e.b.Damaged())
		}
	}
	// A group created after the repair meets the recorded holes: they
	// are settled as lost, never a stop at damage.
	n := 0
	for {
		ds := e.pollNow(late, 100, 0)
		if len(ds) == 0 {
			break
		}
		n += len(ds)
	}
	if n != 598 || e.b.Damaged() != nil {
		t.Fatalf("a group created after the repair got %d messages, want 598; stopped at %+v", n, e.b.Damaged())
	}
}

// TestRepairOfALostSnapshotLosesNothing: a snapshot lost while the event
// log no longer starts at 1 refuses the start; the repair replaces it by
// one that forgets the groups' progress, and every message the group had
// not acked — delivered before or not — is delivered again (acked ones
// may come again too: at least once).
func TestRepairOfALostSnapshotLosesNothing(t *testing.T) {
	e := newEnvWith(t, func(o *Options) { o.SnapshotEvery, o.EventSegmentSize = 20, 4096 })
	tp := e.topic("orders", TopicConfig{})
	g := e.group(tp, "a", GroupConfig{DeadLetter: "-", MaxDeliveries: -1})
	for i := 1; i <= 200; i++ {
		e.publish(tp, fmt.Sprint("m", i))
	}
	acked := map[Seq]bool{}
	for round := 0; round < 6; round++ {
		ds := e.pollNow(g, 30, 0)
		for i, d := range ds {
			if i%3 != 0 {
				if err := e.settle(d, Ack()); err != nil {
					t.Fatal(err)
				}
				acked[d.Handle.Seq] = true
			}
		}
	}
	snap := filepath.Join(tp.dir, "0", snapName)
	waitFor(t, "a snapshot", func() bool { _, err := os.Stat(snap); return err == nil })
	opts := e.opts()
	opts.SnapshotEvery, opts.EventSegmentSize = 20, 4096
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	e.b = nil
	if err := os.Remove(snap); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(e.dir, opts); !IsDamage(err) {
		t.Fatalf("Open without the snapshot: %v", err)
	}
	if _, err := Repair(e.dir, RepairOptions{Engine: opts}); err != nil {
		t.Fatal(err)
	}
	b, err := Open(e.dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	e.b = b
	tp, _ = b.Topic("orders")
	g, _ = tp.FindGroup("a")
	got := map[Seq]bool{}
	for range 20 {
		ds := e.pollNow(g, 100, 0)
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			got[d.Handle.Seq] = true
		}
	}
	for s := Seq(1); s <= 200; s++ {
		if !acked[s] && !got[s] {
			t.Fatalf("offset %d (not acked) not delivered after the repair", s)
		}
	}
}
