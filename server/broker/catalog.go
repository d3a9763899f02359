package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
)

// catalog is the persisted list of topics and groups. Ids come from
// counters that only grow, so an id is never reused.
//
// On disk (catalog.json) it is sealed: {"format":2,"crc32":N,"body":{...}},
// N the CRC-32 (IEEE) of the body's bytes as written, decoded strictly
// (an unknown key is refused, never ignored). The changes made since it
// was written are in catalog.journal (catjournal.go; body version 2 says
// the journal goes with it, and a missing journal is refused), and are
// folded into a new catalog.json once the journal outgrows it, at Open
// and at Close. A fold writes atomically (temp file, fsync, rename,
// directory fsync) after the copy it replaces is kept as
// catalog.json.prev. Each topic directory holds topic.json, the topic's
// own entry (sealed the same way, with the counters), written before the
// change is journaled, so a lost or damaged catalog can be rebuilt
// without loss (fibril repair) and an orphaned topic directory adopted.
// Catalogs written before the seal (format 1: the bare body) are read
// strictly and sealed at Open; version-1 bodies (before the journal) are
// rewritten as version 2 at Open.
type catalog struct {
	Version     int        `json:"version"`
	NextTopicID TopicID    `json:"next_topic_id"`
	NextGroupID GroupID    `json:"next_group_id"`
	Topics      []catTopic `json:"topics"`
	// Index is the replicated catalog's index applied last (catrepl.go);
	// 0 on a broker without one.
	Index uint64 `json:"index,omitempty"`
}

type catTopic struct {
	ID     TopicID     `json:"id"`
	Name   TopicName   `json:"name"`
	Config TopicConfig `json:"config"`
	Groups []catGroup  `json:"groups"`
	// Placement names the nodes holding each partition; nil: every node
	// (a single node, or a catalog from before placement).
	Placement [][]string `json:"placement,omitempty"`
}

type catGroup struct {
	ID     GroupID     `json:"id"`
	Name   GroupName   `json:"name"`
	Config GroupConfig `json:"config"`
	Paused bool        `json:"paused,omitempty"`
}

// topicRecord is a topic directory's topic.json: its catalog entry and the
// catalog's counters when it was written.
type topicRecord struct {
	Topic       catTopic `json:"topic"`
	NextTopicID TopicID  `json:"next_topic_id"`
	NextGroupID GroupID  `json:"next_group_id"`
}

const (
	catalogName     = "catalog.json"
	catalogPrevName = "catalog.json.prev"
	topicRecordName = "topic.json"
	sealFormat      = 2
	// catalogVersion is the body version written: 2, changes since it in
	// catalog.journal. Version 1 (no journal) is still read.
	catalogVersion = 2
)

// ErrCorruptCatalog: the catalog (or a topic's topic.json) is missing,
// fails its checksum, holds an unknown key or an impossible value. Open
// refuses to start rather than guess which topics and groups exist.
var ErrCorruptCatalog = errors.New("broker: damaged catalog")

// seal encodes v as a sealed file: the body indented, its checksum beside.
func seal(v any) ([]byte, error) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\"format\":%d,\"crc32\":%d,\"body\":", sealFormat, crc32.ChecksumIEEE(body))
	b.Write(body)
	b.WriteString("}\n")
	return b.Bytes(), nil
}

// unseal checks a sealed file and decodes its body into v strictly. legacy
// reports a format-1 file (no seal: the body alone), decoded strictly too.
func unseal(b []byte, v any) (legacy bool, err error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return false, fmt.Errorf("not JSON: %v", err)
	}
	if _, sealed := keys["format"]; !sealed {
		return true, decodeStrict(b, v)
	}
	var f struct {
		Format int             `json:"format"`
		CRC32  uint32          `json:"crc32"`
		Body   json.RawMessage `json:"body"`
	}
	if err := decodeStrict(b, &f); err != nil {
		return false, err
	}
	if f.Format != sealFormat {
		return false, fmt.Errorf("format %d (this version reads %d)", f.Format, sealFormat)
	}
	if got := crc32.ChecksumIEEE(f.Body); got != f.CRC32 {
		return false, fmt.Errorf("checksum mismatch (stored %d, computed %d): the file was edited or damaged", f.CRC32, got)
	}
	return false, decodeStrict(f.Body, v)
}

// decodeStrict decodes one JSON value, refusing unknown keys and trailing
// data.
func decodeStrict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// loadCatalog reads dir's catalog and applies its journal. A missing one
// is a new broker only when no topic directory holds data; otherwise Open
// refuses (the catalog was lost: fibril repair rebuilds it). fold: it must
// be written again (new, unsealed, version 1, or its journal holds
// changes or a torn tail).
func loadCatalog(dir string) (c catalog, fold bool, err error) {
	path := filepath.Join(dir, catalogName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		held, herr := topicDirsWithData(dir)
		if herr != nil {
			return catalog{}, false, herr
		}
		if len(held) > 0 {
			return catalog{}, false, fmt.Errorf("%w: %s is missing but %s hold data%s; restore it, or rebuild it from the topics' own records with `fibril repair --data %s`",
				ErrCorruptCatalog, path, joinPaths(held), prevHint(dir), dir)
		}
		if _, err := os.Stat(filepath.Join(dir, catalogPrevName)); err == nil {
			return catalog{}, false, fmt.Errorf("%w: %s is missing%s; restore it, or rebuild it with `fibril repair --data %s`",
				ErrCorruptCatalog, path, prevHint(dir), dir)
		}
		return catalog{Version: catalogVersion, NextTopicID: 1, NextGroupID: 1}, true, nil
	}
	if err != nil {
		return catalog{}, false, fmt.Errorf("read catalog: %w", err)
	}
	c, legacy, err := decodeCatalog(b)
	if err != nil {
		return catalog{}, false, fmt.Errorf("%w: %s: %v%s; restore it, or rebuild it from the topics' own records with `fibril repair --data %s`",
			ErrCorruptCatalog, path, err, prevHint(dir), dir)
	}
	if c.Version == 1 {
		// Written before the journal: a journal beside it is not its own
		// (left by a repair of that version) and the fold replaces it.
		return c, true, nil
	}
	folded, err := c.withJournal(dir)
	if err != nil {
		return catalog{}, false, fmt.Errorf("%w: %v; rebuild the catalog from the topics' own records with `fibril repair --data %s`", ErrCorruptCatalog, err, dir)
	}
	return c, legacy || folded, nil
}

// withJournal applies dir's journal to c (a version-2 catalog) and checks
// the result. It reports whether the journal held anything past its
// header.
func (c *catalog) withJournal(dir string) (nonEmpty bool, err error) {
	n, end, missing, err := readJournal(dir, c)
	switch {
	case err != nil:
		return false, err
	case missing:
		return false, fmt.Errorf("%s is missing (the catalog's changes since it was written are lost)", filepath.Join(dir, journalName))
	}
	if n > 0 {
		if err := c.validate(); err != nil {
			return false, fmt.Errorf("%s: after its changes: %v", filepath.Join(dir, journalName), err)
		}
	}
	size := end
	if fi, err := os.Stat(filepath.Join(dir, journalName)); err == nil {
		size = fi.Size()
	}
	return n > 0 || size > end, nil
}

// decodeCatalog unseals and validates a catalog file's bytes.
func decodeCatalog(b []byte) (catalog, bool, error) {
	var c catalog
	legacy, err := unseal(b, &c)
	if err != nil {
		return catalog{}, false, err
	}
	if err := c.validate(); err != nil {
		return catalog{}, false, err
	}
	return c, legacy, nil
}

// validate checks what a decoded catalog says: counters above every id,
// ids and names unique, names and configurations valid. It fills in the
// compression of topics written before the field.
func (c *catalog) validate() error {
	if c.Version != 1 && c.Version != catalogVersion {
		return fmt.Errorf("version %d (this version reads 1 and %d)", c.Version, catalogVersion)
	}
	if c.NextTopicID == 0 || c.NextGroupID == 0 {
		return errors.New("zero id counters")
	}
	topicIDs, names, groupIDs := map[TopicID]bool{}, map[TopicName]bool{}, map[GroupID]bool{}
	for i := range c.Topics {
		ct := &c.Topics[i]
		if err := ct.validate(c.NextTopicID, c.NextGroupID); err != nil {
			return err
		}
		if topicIDs[ct.ID] || names[ct.Name] {
			return fmt.Errorf("topic %s (id %d) listed twice", ct.Name, ct.ID)
		}
		topicIDs[ct.ID], names[ct.Name] = true, true
		for _, cg := range ct.Groups {
			if groupIDs[cg.ID] {
				return fmt.Errorf("group id %d listed twice", cg.ID)
			}
			groupIDs[cg.ID] = true
		}
	}
	return nil
}

// validate checks one topic entry against the counters.
func (ct *catTopic) validate(nextTopic TopicID, nextGroup GroupID) error {
	if ct.ID == 0 || ct.ID >= nextTopic {
		return fmt.Errorf("topic %s: id %d outside [1, %d)", ct.Name, ct.ID, nextTopic)
	}
	if err := validTopicName(ct.Name, true); err != nil {
		return fmt.Errorf("topic id %d: %v", ct.ID, err)
	}
	tc := &ct.Config
	switch tc.Compression {
	case "":
		// Written before the field existed: segments were plain.
		tc.Compression = CompressionNone
	case CompressionNone, CompressionS2, CompressionZstd:
	default:
		return fmt.Errorf("topic %s: unknown compression %q", ct.Name, tc.Compression)
	}
	if tc.BlockTimeoutMs == 0 {
		tc.BlockTimeoutMs = DefaultBlockTimeoutMs // written before the field existed
	}
	tc.fillDuplicates() // written before the fields existed: the defaults
	if d, err := tc.withDefaults(ct.Name); err != nil {
		return fmt.Errorf("topic %s: %v", ct.Name, err)
	} else if d.Partitions != tc.Partitions || d.Durability != tc.Durability {
		return fmt.Errorf("topic %s: configuration lacks its defaults (partitions %d, durability %q)", ct.Name, tc.Partitions, tc.Durability)
	}
	groups := map[GroupName]bool{}
	for _, cg := range ct.Groups {
		if cg.ID == 0 || cg.ID >= nextGroup {
			return fmt.Errorf("topic %s: group %s: id %d outside [1, %d)", ct.Name, cg.Name, cg.ID, nextGroup)
		}
		if groups[cg.Name] {
			return fmt.Errorf("topic %s: group %s listed twice", ct.Name, cg.Name)
		}
		groups[cg.Name] = true
		if cg.Config.LeaseMs == 0 || cg.Config.MaxDeliveries == 0 || cg.Config.Start == "" {
			return fmt.Errorf("topic %s: group %s: configuration lacks lease_ms, max_deliveries or start", ct.Name, cg.Name)
		}
		if _, err := cg.Config.withDefaults(ct.Name, cg.Name); err != nil {
			return fmt.Errorf("topic %s: group %s: %v", ct.Name, cg.Name, err)
		}
	}
	return nil
}

// save writes the catalog to dir as version 2 with an empty journal,
// keeping the copy it replaces as catalog.json.prev. touched names a
// topic whose entry (or the counters) changed: its topic.json is written
// first (0: none). A crash between the catalog and the empty journal
// leaves the old journal, whose changes the new catalog holds already.
func (c *catalog) save(dir string, touched TopicID) error {
	if touched != 0 {
		for _, ct := range c.Topics {
			if ct.ID == touched {
				if err := writeTopicRecord(topicDirOf(dir, ct.ID), topicRecord{Topic: ct, NextTopicID: c.NextTopicID, NextGroupID: c.NextGroupID}); err != nil {
					return err
				}
			}
		}
	}
	v := *c
	v.Version = catalogVersion
	b, err := seal(&v)
	if err != nil {
		return fmt.Errorf("encode catalog: %w", err)
	}
	// A version-2 catalog is never on disk without its journal.
	if _, err := os.Stat(filepath.Join(dir, journalName)); errors.Is(err, os.ErrNotExist) {
		if err := createJournal(dir); err != nil {
			return err
		}
	}
	if err := keepPrevious(dir); err != nil {
		return err
	}
	if err := writeFileAtomic(dir, catalogName, b); err != nil {
		return err
	}
	c.Version = catalogVersion
	return createJournal(dir)
}

// keepPrevious makes the current catalog.json the previous copy (a hard
// link renamed over catalog.json.prev; a copy where links fail). The
// directory fsync of the catalog's own write makes it durable.
func keepPrevious(dir string) error {
	cur, prev := filepath.Join(dir, catalogName), filepath.Join(dir, catalogPrevName)
	tmp := prev + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Link(cur, tmp); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // the first catalog
		}
		b, rerr := os.ReadFile(cur)
		if rerr != nil {
			return fmt.Errorf("keep the previous catalog: %w", rerr)
		}
		return writeFileAtomic(dir, catalogPrevName, b)
	}
	if err := os.Rename(tmp, prev); err != nil {
		return fmt.Errorf("keep the previous catalog: %w", err)
	}
	return nil
}

// writeTopicRecord writes a topic directory's topic.json.
func writeTopicRecord(tdir string, r topicRecord) error {
	b, err := seal(r)
	if err != nil {
		return fmt.Errorf("encode %s: %w", topicRecordName, err)
	}
	return writeFileAtomic(tdir, topicRecordName, b)
}

// readTopicRecord reads and checks a topic directory's topic.json.
func readTopicRecord(tdir string) (topicRecord, error) {
	path := filepath.Join(tdir, topicRecordName)
	b, err := os.ReadFile(path)
	if err != nil {
		return topicRecord{}, err
	}
	var r topicRecord
	if _, err := unseal(b, &r); err != nil {
		return topicRecord{}, fmt.Errorf("%w: %s: %v", ErrCorruptCatalog, path, err)
	}
	if err := r.Topic.validate(r.NextTopicID, r.NextGroupID); err != nil {
		return topicRecord{}, fmt.Errorf("%w: %s: %v", ErrCorruptCatalog, path, err)
	}
	if want := strconv.FormatUint(uint64(r.Topic.ID), 10); filepath.Base(tdir) != want {
		return topicRecord{}, fmt.Errorf("%w: %s names topic id %d", ErrCorruptCatalog, path, r.Topic.ID)
	}
	return r, nil
}

// syncTopicRecord writes ct's topic.json unless it already says the same
// (topic directories made before topic.json existed get one at Open).
func (c *catalog) syncTopicRecord(dir string, ct catTopic) error {
	tdir := topicDirOf(dir, ct.ID)
	if r, err := readTopicRecord(tdir); err == nil && reflect.DeepEqual(r.Topic, ct) {
		return nil
	}
	return writeTopicRecord(tdir, topicRecord{Topic: ct, NextTopicID: c.NextTopicID, NextGroupID: c.NextGroupID})
}

func (c *catalog) topic(name TopicName) *catTopic {
	for i := range c.Topics {
		if c.Topics[i].Name == name {
			return &c.Topics[i]
		}
	}
	return nil
}

func topicDirOf(dir string, id TopicID) string {
	return filepath.Join(dir, "topics", strconv.FormatUint(uint64(id), 10))
}

// TopicDirs lists the numbered topic directories under dir/topics by id.
func topicDirIDs(dir string) ([]TopicID, error) {
	es, err := os.ReadDir(filepath.Join(dir, "topics"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list topic directories: %w", err)
	}
	var ids []TopicID
	for _, e := range es {
		if n, err := strconv.ParseUint(e.Name(), 10, 64); err == nil && e.IsDir() && n > 0 {
			ids = append(ids, TopicID(n))
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

// topicDirsWithData lists the topic directories that hold records, a
// snapshot or a topic.json (what a catalog that lists nothing would lose).
func topicDirsWithData(dir string) ([]string, error) {
	ids, err := topicDirIDs(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		tdir := topicDirOf(dir, id)
		held := false
		_ = filepath.WalkDir(tdir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || held {
				return nil
			}
			held = fileHoldsData(path, d.Name())
			return nil
		})
		if held {
			out = append(out, tdir)
		}
	}
	return out, nil
}

// fileHoldsData reports whether a file of a topic directory holds data: a
// snapshot, topic.json, a compressed segment, or a segment whose first
// record slot is not zero (a segment created and never written holds only
// its header).
func fileHoldsData(path, name string) bool {
	switch {
	case name == snapName || name == topicRecordName:
		return true
	case filepath.Ext(name) == ".s2" || filepath.Ext(name) == ".zst":
		return true
	case filepath.Ext(name) != ".seg":
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return true // cannot tell: count it
	}
	defer f.Close()
	b := make([]byte, 32)
	if n, _ := f.ReadAt(b, 32); n < len(b) {
		return false
	}
	return !bytes.Equal(b, make([]byte, 32))
}

// prevHint tells the operator about catalog.json.prev, if there is one.
func prevHint(dir string) string {
	prev := filepath.Join(dir, catalogPrevName)
	if _, err := os.Stat(prev); err == nil {
		return fmt.Sprintf(" (the previous copy is %s)", prev)
	}
	return ""
}

func joinPaths(ps []string) string {
	if len(ps) > 3 {
		return fmt.Sprintf("%s, %s and %d more", ps[0], ps[1], len(ps)-2)
	}
	var b bytes.Buffer
	for i, p := range ps {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p)
	}
	return b.String()
}

func sortNames[T ~string](s []T) { sort.Slice(s, func(i, j int) bool { return s[i] < s[j] }) }
