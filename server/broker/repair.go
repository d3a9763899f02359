package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
)

// Repair: the explicit, offline way back after a refused start (fibril
// repair). Nothing is deleted: every damaged or replaced file is first
// copied (or moved) into a quarantine folder beside the data, the damaged
// ranges of the logs become holes their indexes record, and the broker is
// opened once so that every group settles what it lost, listed exactly.

// RepairOptions configures Repair.
type RepairOptions struct {
	// Engine gives the segment sizes and the rest of the options the
	// broker is opened with at the end of the repair (zero: defaults).
	Engine Options
	// Adopt takes topic directories the catalog does not list back into
	// it, from their topic.json (a name already taken is left out).
	Adopt bool
	// Now names the quarantine folder (zero: the current time).
	Now time.Time
}

// RepairReport is what Repair did.
type RepairReport struct {
	// Quarantine is the folder holding the copies of everything damaged,
	// moved or replaced, and REPORT.json (empty: nothing was repaired).
	Quarantine string `json:"quarantine,omitempty"`
	// Before is what Verify found before the repair.
	Before VerifyReport `json:"before"`
	// Actions says what was done, one line each.
	Actions []string `json:"actions"`
	// Losses lists, per group and partition, the offsets it lost: records
	// destroyed by damage that it had not settled. Settled without
	// delivery; the copies of their bytes are in Quarantine.
	Losses []Loss `json:"losses"`
	// After is what Verify found after the repair (notes at most).
	After VerifyReport `json:"after"`
}

// Repair repairs the stopped broker data directory dir: it verifies it,
// and if anything more than a note was found, quarantines what is damaged
// (dir/quarantine/<time>/), rebuilds a missing or damaged catalog from the
// topics' topic.json (adopting orphaned topic directories with
// o.Adopt), records the damaged ranges of every log as holes, replaces a
// damaged or missing snapshot by one that forgets the groups' progress
// (messages are delivered again, never lost), opens the broker once so
// every group settles the offsets it lost (Losses), and verifies again. It
// fails if a server has dir open, on an I/O error, or when the repaired
// directory still does not verify clean.
func Repair(dir string, o RepairOptions) (RepairReport, error) {
	var rep RepairReport
	eng, err := o.Engine.withDefaults()
	if err != nil {
		return rep, err
	}
	rep.Before, err = Verify(dir, eng)
	if err != nil {
		return rep, err
	}
	orphans := rep.Before.Count(FindingOrphan) > 0 && o.Adopt
	if rep.Before.Worst() <= FindingNote || (rep.Before.Worst() == FindingOrphan && !orphans) {
		rep.After = rep.Before
		return rep, nil
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	rep.Quarantine = filepath.Join(dir, "quarantine", now.UTC().Format("20060102T150405Z"))
	if err := os.MkdirAll(rep.Quarantine, 0o755); err != nil {
		return rep, fmt.Errorf("repair: %w", err)
	}
	r := &repairer{dir: dir, q: rep.Quarantine, eng: eng, rep: &rep}
	if err := r.catalog(o.Adopt); err != nil {
		return rep, err
	}
	c, _, err := loadCatalog(dir)
	if err != nil {
		return rep, fmt.Errorf("repair: %w", err)
	}
	for _, ct := range c.Topics {
		for i := 0; i < ct.Config.Partitions; i++ {
			pdir := filepath.Join(topicDirOf(dir, ct.ID), strconv.Itoa(i))
			if err := r.partition(pdir, ct); err != nil {
				return rep, err
			}
		}
	}
	eng.Logf = func(format string, args ...any) { r.action("broker: "+format, args...) }
	b, err := Open(dir, eng)
	if err != nil {
		return rep, fmt.Errorf("repair: open the repaired broker: %w", err)
	}
	rep.Losses = b.Losses()
	if err := b.Close(); err != nil {
		return rep, fmt.Errorf("repair: close the repaired broker: %w", err)
	}
	rep.After, err = Verify(dir, eng)
	if err != nil {
		return rep, err
	}
	if js, err := json.MarshalIndent(rep, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(rep.Quarantine, "REPORT.json"), js, 0o644)
	}
	if w := rep.After.Worst(); w > FindingNote && !(w == FindingOrphan && !o.Adopt) {
		return rep, fmt.Errorf("repair: %s still does not verify: %s", dir, rep.After.Findings[0])
	}
	return rep, nil
}

// repairer carries one repair's state.
type repairer struct {
	dir, q string
	eng    Options
	rep    *RepairReport
}

func (r *repairer) action(format string, args ...any) {
	r.rep.Actions = append(r.rep.Actions, fmt.Sprintf(format, args...))
}

// keep copies path (a file) into the quarantine, at its place relative to
// the data directory.
func (r *repairer) keep(path string) error {
	dst, err := r.quarantinePath(path)
	if err != nil {
		return err
	}
	in, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("repair: quarantine %s: %w", path, err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("repair: quarantine %s: %w", path, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("repair: quarantine %s: %w", path, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("repair: quarantine %s: %w", path, err)
	}
	return out.Close()
}

// move moves path into the quarantine (the log or broker then sees it
// gone).
func (r *repairer) move(path string) error {
	dst, err := r.quarantinePath(path)
	if err != nil {
		return err
	}
	if err := os.Rename(path, dst); err != nil {
		return fmt.Errorf("repair: quarantine %s: %w", path, err)
	}
	return nil
}

func (r *repairer) quarantinePath(path string) (string, error) {
	rel, err := filepath.Rel(r.dir, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = filepath.Base(path)
	}
	dst := filepath.Join(r.q, rel)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", fmt.Errorf("repair: %w", err)
	}
	return dst, nil
}

// catalog rebuilds a missing or damaged catalog from the topics'
// topic.json (and its previous copy's counters), or adopts orphans.
func (r *repairer) catalog(adopt bool) error {
	path := filepath.Join(r.dir, catalogName)
	cur, _, err := loadCatalog(r.dir)
	rebuild := err != nil
	if !rebuild && !adopt {
		return nil
	}
	c := cur
	if rebuild {
		if _, serr := os.Stat(path); serr == nil {
			if err := r.move(path); err != nil {
				return err
			}
			r.action("moved the damaged catalog %s to the quarantine", path)
		}
		// The topics' topic.json hold every change the journal did.
		if jpath := filepath.Join(r.dir, journalName); fileExists(jpath) {
			if err := r.move(jpath); err != nil {
				return err
			}
			r.action("moved the catalog journal %s to the quarantine", jpath)
		}
		c = catalog{Version: 1, NextTopicID: 1, NextGroupID: 1}
		if pb, perr := os.ReadFile(filepath.Join(r.dir, catalogPrevName)); perr == nil {
			if prev, _, derr := decodeCatalog(pb); derr == nil {
				c.NextTopicID, c.NextGroupID = prev.NextTopicID, prev.NextGroupID
			}
		}
	}
	ids, err := topicDirIDs(r.dir)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if slicesContainsTopic(c.Topics, id) {
			continue
		}
		tdir := topicDirOf(r.dir, id)
		tr, terr := readTopicRecord(tdir)
		if terr != nil {
			r.action("kept %s out of the catalog: %v", tdir, terr)
			continue
		}
		if c.topic(tr.Topic.Name) != nil {
			r.action("kept %s out of the catalog: topic %s exists already", tdir, tr.Topic.Name)
			continue
		}
		c.Topics = append(c.Topics, tr.Topic)
		c.NextTopicID = max(c.NextTopicID, tr.NextTopicID, id+1)
		c.NextGroupID = max(c.NextGroupID, tr.NextGroupID)
		for _, g := range tr.Topic.Groups {
			c.NextGroupID = max(c.NextGroupID, g.ID+1)
		}
		what := "adopted"
		if rebuild {
			what = "took back"
		}
		r.action("%s topic %s (id %d, %d groups) from %s", what, tr.Topic.Name, id, len(tr.Topic.Groups), filepath.Join(tdir, topicRecordName))
	}
	sort.Slice(c.Topics, func(i, j int) bool { return c.Topics[i].ID < c.Topics[j].ID })
	if err := c.validate(); err != nil {
		return fmt.Errorf("repair: the rebuilt catalog: %w", err)
	}
	if err := c.save(r.dir, 0); err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	r.action("wrote %s with %d topics", path, len(c.Topics))
	return nil
}

func slicesContainsTopic(ts []catTopic, id TopicID) bool {
	for _, t := range ts {
		if t.ID == id {
			return true
		}
	}
	return false
}

// partition repairs one partition's logs and snapshot.
func (r *repairer) partition(pdir string, ct catTopic) error {
	if _, err := os.Stat(pdir); err != nil {
		return fmt.Errorf("repair: topic %s: partition directory %s is missing: restore it from a backup", ct.Name, pdir)
	}
	if err := r.log(filepath.Join(pdir, dataLogName), r.eng.SegmentSize, "messages"); err != nil {
		return err
	}
	if err := r.log(filepath.Join(pdir, eventsLogName), r.eng.EventSegmentSize, "consumer events"); err != nil {
		return err
	}
	return r.snapshot(pdir, ct)
}

// log repairs one log: the segments holding damage are copied into the
// quarantine, a segment that cannot be opened at all (its header or, for a
// compressed one, its body damaged) is moved there, and the log is opened
// with SkipCorrupt, which records the damaged ranges in its indexes.
func (r *repairer) log(dir string, segSize int64, what string) error {
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("repair: log directory %s is missing: restore it from a backup", dir)
	}
	kept := map[string]bool{}
	for range 1000 { // bounded: each turn moves one file away
		l, err := seglog.Open(dir, seglog.Options{ReadOnly: true, Verify: true, SkipCorrupt: true, SegmentSize: segSize})
		var ce *seglog.CorruptError
		if errors.As(err, &ce) {
			if _, serr := os.Stat(ce.Path); serr != nil || filepath.Dir(ce.Path) != dir {
				return fmt.Errorf("repair: %s: %w", dir, err)
			}
			if err := r.move(ce.Path); err != nil {
				return err
			}
			r.action("moved %s to the quarantine: %s (its %s are lost)", ce.Path, ce.Reason, what)
			continue
		}
		if err != nil {
			return fmt.Errorf("repair: %s: %w", dir, err)
		}
		rec := l.Recovery()
		l.Close()
		uncompressed := false
		for _, s := range rec.Skipped {
			// A range lost after a compressed segment is recorded in the
			// index of its plain form.
			if ext := filepath.Ext(s.Path); !s.Recorded && (ext == ".s2" || ext == ".zst") {
				if err := seglog.Uncompress(dir, s.Path, r.move); err != nil {
					return fmt.Errorf("repair: %w", err)
				}
				r.action("moved %s to the quarantine and wrote it back uncompressed, to record what is lost after it", s.Path)
				uncompressed = true
			}
		}
		if uncompressed {
			continue
		}
		fresh := 0
		for _, s := range rec.Skipped {
			if s.Recorded {
				continue
			}
			fresh++
			if _, serr := os.Stat(s.Path); serr == nil && !kept[s.Path] && filepath.Dir(s.Path) == dir {
				kept[s.Path] = true
				if err := r.keep(s.Path); err != nil {
					return err
				}
			}
			r.action("%s: %s %d..%d lost to damage at offset %d (%d bytes); a copy of the file is in the quarantine", s.Path, what, s.From, s.To, s.Offset, s.Length)
		}
		if fresh == 0 {
			return nil
		}
		w, err := seglog.Open(dir, seglog.Options{SkipCorrupt: true, Verify: true, SegmentSize: segSize})
		if err != nil {
			return fmt.Errorf("repair: %s: %w", dir, err)
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("repair: %s: %w", dir, err)
		}
		return nil
	}
	return fmt.Errorf("repair: %s: too many damaged files", dir)
}

// snapshot replaces a damaged snapshot, or a missing one the event log
// needs, by one at the event log's start that records no progress: every
// group's unsettled messages (and settled ones whose acks only the lost
// snapshot held) are delivered again.
func (r *repairer) snapshot(pdir string, ct catTopic) error {
	path := filepath.Join(pdir, snapName)
	b, err := os.ReadFile(path)
	if err == nil {
		if _, _, derr := decodeSnapshot(b); derr == nil {
			return nil
		}
		if err := r.move(path); err != nil {
			return err
		}
		r.action("moved the damaged snapshot %s to the quarantine", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("repair: %w", err)
	}
	ev, err := seglog.Open(filepath.Join(pdir, eventsLogName), seglog.Options{ReadOnly: true, SegmentSize: r.eng.EventSegmentSize})
	if err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	first, _ := ev.Bounds()
	// The highest offset the remaining events name, per group: replaying
	// a delivery moves the group's next past every offset below it, so
	// those must stand in the snapshot as pending, or they would be
	// skipped.
	named := map[GroupID]Seq{}
	serr := ev.Scan(first, 0, func(rec seglog.Record) bool {
		_ = decodeEvents(rec.Data, func(e event) { named[e.group] = max(named[e.group], e.seq) })
		return true
	})
	ev.Close()
	if serr != nil {
		return fmt.Errorf("repair: %w", serr)
	}
	if first <= 1 {
		return nil // the event log holds every event: nothing to stand in for
	}
	data, err := seglog.Open(filepath.Join(pdir, dataLogName), seglog.Options{ReadOnly: true, SegmentSize: r.eng.SegmentSize})
	if err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	dfirst, dlast := data.Bounds()
	data.Close()
	var gs []*groupState
	for _, g := range ct.Groups {
		st := newGroupState(g.ID, 0, 0, dfirst)
		for s := dfirst; s <= min(named[g.ID], dlast); s++ {
			st.pending[s] = pendingOff{state: stReady}
		}
		gs = append(gs, st)
	}
	if err := writeFileAtomic(pdir, snapName, encodeSnapshot(first-1, gs)); err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	r.action("wrote %s covering events up to %d with no group progress: every message retained from %d is delivered again to %d groups", path, first-1, dfirst, len(gs))
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
