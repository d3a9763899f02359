package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/fibrilmq/fibril/server/seglog"
)

// Verify: a read-only check of a stopped broker's data directory (fibril
// verify). Every log is opened with seglog's ReadOnly, Verify and
// SkipCorrupt, so every record of every segment is read and checked and
// nothing is changed; the catalog, each topic.json and each snapshot are
// decoded as Open would.

// FindingKind classifies what Verify found, from the least to the most
// severe. fibril verify exits with a code per kind (the most severe found).
type FindingKind int

// Finding kinds.
const (
	// FindingNote: something the server repairs or ignores by itself at
	// its next start, losing nothing: a torn tail never confirmed, an
	// index to rebuild, bytes after the end of a log, an unsealed
	// catalog, a range an earlier repair recorded as lost.
	FindingNote FindingKind = iota + 1
	// FindingOrphan: a topic directory the catalog does not list: kept,
	// not served; fibril repair --adopt takes it back.
	FindingOrphan
	// FindingState: consumer state (event log records, a snapshot) damaged
	// or missing: the start is refused; a repair forgets the lost events
	// (their messages may be delivered again).
	FindingState
	// FindingRecords: message records damaged or missing: the start is
	// refused; a repair quarantines them and lists what each group loses.
	FindingRecords
	// FindingCatalog: the catalog missing or damaged: the start is refused;
	// a repair rebuilds it from the topics' own topic.json.
	FindingCatalog
)

// String names the kind as fibril verify prints it.
func (k FindingKind) String() string {
	switch k {
	case FindingNote:
		return "note"
	case FindingOrphan:
		return "orphan"
	case FindingState:
		return "state"
	case FindingRecords:
		return "records"
	case FindingCatalog:
		return "catalog"
	}
	return fmt.Sprintf("FindingKind(%d)", int(k))
}

// MarshalText makes a kind read as its name in JSON.
func (k FindingKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Finding is one thing Verify found, naming the file and where in it.
type Finding struct {
	Kind FindingKind `json:"kind"`
	// Path is the file (or directory) at fault.
	Path string `json:"path"`
	// Offset is the byte offset in Path (0: the whole file).
	Offset int64 `json:"offset,omitempty"`
	// From and To are the sequence numbers concerned (0: none).
	From Seq `json:"from,omitempty"`
	To   Seq `json:"to,omitempty"`
	// Detail says what is wrong and what a start or a repair does about it.
	Detail string `json:"detail"`
}

// String is the line fibril verify prints.
func (f Finding) String() string {
	s := fmt.Sprintf("%-7s %s", f.Kind, f.Path)
	if f.Offset != 0 {
		s += fmt.Sprintf(" at offset %d", f.Offset)
	}
	switch {
	case f.From != 0 && f.To > f.From:
		s += fmt.Sprintf(" (seq %d..%d)", f.From, f.To)
	case f.From != 0:
		s += fmt.Sprintf(" (seq %d)", f.From)
	}
	return s + ": " + f.Detail
}

// VerifyReport is what Verify checked and found.
type VerifyReport struct {
	Dir        string    `json:"dir"`
	Topics     int       `json:"topics"`
	Partitions int       `json:"partitions"`
	Segments   int       `json:"segments"`
	Records    uint64    `json:"records"` // message records retained
	Bytes      int64     `json:"bytes"`   // record bytes checked
	Findings   []Finding `json:"findings"`
}

// Worst returns the most severe kind found (0: nothing).
func (r VerifyReport) Worst() FindingKind {
	var w FindingKind
	for _, f := range r.Findings {
		w = max(w, f.Kind)
	}
	return w
}

// Count returns how many findings are of kind k.
func (r VerifyReport) Count(k FindingKind) int {
	n := 0
	for _, f := range r.Findings {
		if f.Kind == k {
			n++
		}
	}
	return n
}

func (r *VerifyReport) add(k FindingKind, path string, off int64, from, to Seq, format string, args ...any) {
	r.Findings = append(r.Findings, Finding{Kind: k, Path: path, Offset: off, From: from, To: to, Detail: fmt.Sprintf(format, args...)})
}

// Verify reads every file of the broker data directory dir and reports
// what is damaged or missing, changing nothing. It fails (with ErrLocked
// from seglog) if a server has the directory open, or on an I/O error; a
// damaged file is a Finding, not an error. opts gives the segment sizes
// (zero: the defaults).
func Verify(dir string, opts Options) (VerifyReport, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return VerifyReport{}, err
	}
	rep := VerifyReport{Dir: dir}
	if _, err := os.Stat(dir); err != nil {
		return rep, fmt.Errorf("verify %s: %w", dir, err)
	}
	// A broker keeps idle partitions' logs closed (their own locks
	// released): its directory lock is what says it runs.
	lock, err := lockBrokerDir(dir, false)
	if err != nil {
		return rep, fmt.Errorf("verify %s: %w", dir, err)
	}
	if lock != nil {
		defer lock.Close()
	}
	topics := checkCatalog(dir, &rep)
	for _, ct := range topics {
		rep.Topics++
		tdir := topicDirOf(dir, ct.ID)
		if _, err := os.Stat(tdir); err != nil {
			rep.add(FindingRecords, tdir, 0, 0, 0, "topic %s: its directory is missing (the catalog lists it): restore it from a backup", ct.Name)
			continue
		}
		for i := 0; i < ct.Config.Partitions; i++ {
			rep.Partitions++
			if err := checkPartition(filepath.Join(tdir, strconv.Itoa(i)), ct, o, &rep); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

// checkCatalog checks the catalog, its previous copy and every topic.json,
// reports orphaned topic directories, and returns the topics to check:
// the catalog's, or when it is unusable the ones the topic directories
// describe.
func checkCatalog(dir string, rep *VerifyReport) []catTopic {
	path := filepath.Join(dir, catalogName)
	var cat *catalog
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if held, _ := topicDirsWithData(dir); len(held) > 0 {
			rep.add(FindingCatalog, path, 0, 0, 0, "missing, but %s hold data: the start is refused; fibril repair rebuilds it from their topic.json", joinPaths(held))
		}
	case err != nil:
		rep.add(FindingCatalog, path, 0, 0, 0, "unreadable: %v", err)
	default:
		c, legacy, derr := decodeCatalog(b)
		switch {
		case derr != nil:
			rep.add(FindingCatalog, path, 0, 0, 0, "%v: the start is refused; fibril repair rebuilds it from the topics' topic.json", derr)
		case legacy:
			cat = &c
			rep.add(FindingNote, path, 0, 0, 0, "written without a checksum by an earlier version: sealed at the next start")
		default:
			cat = &c
		}
	}
	if cat != nil && cat.Version >= catalogVersion {
		if _, err := cat.withJournal(dir); err != nil {
			rep.add(FindingCatalog, filepath.Join(dir, journalName), 0, 0, 0, "%v: the start is refused; fibril repair rebuilds the catalog from the topics' topic.json", err)
			cat = nil
		}
	}
	prev := filepath.Join(dir, catalogPrevName)
	if pb, err := os.ReadFile(prev); err == nil {
		if _, _, derr := decodeCatalog(pb); derr != nil {
			rep.add(FindingNote, prev, 0, 0, 0, "the previous copy is damaged (%v): replaced at the next catalog change", derr)
		}
	}
	ids, err := topicDirIDs(dir)
	if err != nil {
		rep.add(FindingRecords, filepath.Join(dir, "topics"), 0, 0, 0, "%v", err)
	}
	listed := map[TopicID]bool{}
	var topics []catTopic
	if cat != nil {
		for _, ct := range cat.Topics {
			listed[ct.ID] = true
			topics = append(topics, ct)
		}
	}
	for _, id := range ids {
		tdir := topicDirOf(dir, id)
		r, rerr := readTopicRecord(tdir)
		switch {
		case listed[id] && rerr != nil:
			rep.add(FindingNote, filepath.Join(tdir, topicRecordName), 0, 0, 0, "%v: rewritten from the catalog at the next start", rerr)
		case listed[id]:
		case cat == nil && rerr == nil:
			topics = append(topics, r.Topic) // checked through its own record
		case cat != nil && rerr == nil:
			rep.add(FindingOrphan, tdir, 0, 0, 0, "topic %s is not in the catalog: kept and not served; fibril repair --adopt takes it back", r.Topic.Name)
		default:
			k := FindingOrphan
			if cat == nil {
				k = FindingCatalog
			}
			rep.add(k, tdir, 0, 0, 0, "not in the catalog and no usable topic.json (%v): kept; it cannot be adopted", rerr)
		}
	}
	sort.Slice(topics, func(i, j int) bool { return topics[i].ID < topics[j].ID })
	return topics
}

// checkPartition checks one partition directory: its data log, event log
// and snapshot.
func checkPartition(pdir string, ct catTopic, o Options, rep *VerifyReport) error {
	if _, err := os.Stat(pdir); err != nil {
		rep.add(FindingRecords, pdir, 0, 0, 0, "topic %s: partition directory missing: restore it from a backup", ct.Name)
		return nil
	}
	data, err := checkLog(filepath.Join(pdir, dataLogName), o.SegmentSize, FindingRecords, rep)
	if err != nil {
		return err
	}
	if data != nil {
		if first, last := data.Bounds(); last >= first {
			rep.Records += uint64(last - first + 1)
		}
		data.Close()
	}
	events, err := checkLog(filepath.Join(pdir, eventsLogName), o.EventSegmentSize, FindingState, rep)
	if err != nil {
		return err
	}
	evFirst, evLast := Seq(1), Seq(0)
	if events != nil {
		defer events.Close()
		evFirst, evLast = events.Bounds()
		checkEvents(events, filepath.Join(pdir, eventsLogName), rep)
	}
	snap := filepath.Join(pdir, snapName)
	b, err := os.ReadFile(snap)
	switch {
	case err == nil:
		if _, _, derr := decodeSnapshot(b); derr != nil {
			rep.add(FindingState, snap, 0, 0, 0, "%v: the start is refused; fibril repair replaces it (the groups' progress before event %d is forgotten: their messages are delivered again)", derr, evFirst)
		}
	case errors.Is(err, os.ErrNotExist):
		if evFirst > 1 {
			rep.add(FindingState, snap, 0, 0, 0, "missing, and the event log starts at event %d: the start is refused; fibril repair replaces it (the groups' progress before it is forgotten: their messages are delivered again)", evFirst)
		} else if evLast >= Seq(o.SnapshotEvery) {
			rep.add(FindingNote, snap, 0, 0, 0, "missing, though the event log holds %d events (a snapshot is written every %d): the next start replays them all", evLast, o.SnapshotEvery)
		}
	default:
		rep.add(FindingState, snap, 0, 0, 0, "unreadable: %v", err)
	}
	return nil
}

// checkLog opens one log read-only, checking every record, and reports
// what its Open would meet; bad is the kind of a damaged range. It returns
// the open log (nil when it cannot be opened: reported).
func checkLog(dir string, segSize int64, bad FindingKind, rep *VerifyReport) (*seglog.Log, error) {
	if _, err := os.Stat(dir); err != nil {
		rep.add(bad, dir, 0, 0, 0, "log directory missing: restore it from a backup")
		return nil, nil
	}
	l, err := seglog.Open(dir, seglog.Options{ReadOnly: true, Verify: true, SkipCorrupt: true, SegmentSize: segSize})
	var ce *seglog.CorruptError
	switch {
	case errors.As(err, &ce):
		rep.add(bad, ce.Path, ce.Offset, ce.Seq, 0, "%s: the start is refused; fibril repair moves the file to the quarantine", ce.Reason)
		return nil, nil
	case errors.Is(err, seglog.ErrLocked):
		return nil, fmt.Errorf("verify %s: %w (stop the server first)", dir, err)
	case err != nil:
		return nil, fmt.Errorf("verify %s: %w", dir, err)
	}
	rec := l.Recovery()
	for _, r := range rec.Skipped {
		what := "messages"
		if bad == FindingState {
			what = "consumer events"
		}
		switch {
		case r.Recorded:
			rep.add(FindingNote, r.Path, r.Offset, r.From, r.To, "%s lost to damage earlier, recorded by a repair", what)
		case r.From > r.To:
			rep.add(bad, r.Path, r.Offset, 0, 0, "%d damaged bytes holding no whole record: the start is refused; fibril repair records them", r.Length)
		default:
			rep.add(bad, r.Path, r.Offset, r.From, r.To, "%s damaged or missing (%d bytes): the start is refused; fibril repair quarantines them", what, r.Length)
		}
	}
	if rec.TruncatedBytes > 0 {
		rep.add(FindingNote, rec.TruncatedPath, rec.TruncatedAt, 0, 0, "a torn write of %d bytes after the last confirmed record: cut at the next start (never confirmed)", rec.TruncatedBytes)
	}
	if n := max(rec.RebuiltIndexes, rec.BadIndexes); n > 0 {
		rep.add(FindingNote, dir, 0, 0, 0, "%d segment indexes missing, damaged or stale: rebuilt at the next start", n)
	}
	if rec.BadMarker {
		rep.add(FindingNote, filepath.Join(dir, "CLEAN"), 0, 0, 0, "the clean-shutdown marker is damaged: the next start scans the last segment")
	}
	segs := l.Segments()
	if (rec.BadLock || rec.DurableHint == 0) && len(segs) > 0 && segs[len(segs)-1].Last >= segs[0].First {
		rep.add(FindingNote, filepath.Join(dir, "LOCK"), 0, 0, 0, "the durable-point and front hints are missing or damaged: the next start checks the log's end and front less strictly, and writes them again")
	}
	rep.Segments += len(segs)
	for _, s := range segs {
		rep.Bytes += s.Bytes
		if !s.Compressed {
			checkAfterEnd(filepath.Join(dir, fmt.Sprintf("%020d.seg", s.First)), s, segSize, rep)
		}
	}
	return l, nil
}

// checkAfterEnd reports a last segment file longer than the log ever makes
// one (bytes appended after its end): ignored by the server.
func checkAfterEnd(path string, s seglog.SegmentInfo, segSize int64, rep *VerifyReport) {
	fi, err := os.Stat(path)
	if err != nil {
		return
	}
	size := fi.Size()
	grown := int64(1 << 20)
	for grown < size && grown < segSize {
		grown *= 2
	}
	if size != min(grown, segSize) && size != segSize && size > 32+s.Bytes {
		rep.add(FindingNote, path, 32+s.Bytes, 0, 0, "the file is %d bytes, longer than the log makes it: bytes after the end of the records, ignored", size)
	}
}

// checkEvents decodes every event record the way Open replays them.
func checkEvents(l *seglog.Log, dir string, rep *VerifyReport) {
	first, last := l.Bounds()
	for at := first; at <= last; {
		was := at
		err := l.Scan(at, 1<<20, func(r seglog.Record) bool {
			if derr := decodeEvents(r.Data, func(event) {}); derr != nil {
				rep.add(FindingState, dir, 0, r.Seq, 0, "event record %d does not decode: %v", r.Seq, derr)
			}
			at = r.Seq + 1
			return true
		})
		if err != nil {
			rep.add(FindingState, dir, 0, at, 0, "reading the events: %v", err)
			return
		}
		if at == was {
			return
		}
	}
}
