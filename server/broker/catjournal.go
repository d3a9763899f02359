package broker

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// The catalog journal (catalog.journal) holds the catalog changes made
// since catalog.json was last written, so a topic or group change appends
// one small record and fsyncs it instead of rewriting the whole catalog.
// Once the journal outgrows the catalog (and at Open and Close) the
// changes are folded into a new catalog.json (catalog.save) and the
// journal is emptied, so the cost of a change stays constant on average.
//
// Layout: a 24-byte header (magic, the durable-length hint, the CRC-32 of
// both, 4 zero bytes), then records: body length (uint32 LE), the body's
// CRC-32 IEEE, the body (a catChange in JSON, decoded strictly). The hint
// is how far the journal was durable at its last fsync; it is rewritten
// after each fsync and made durable by the next one, so it never names
// bytes that were not on disk. On read, damage at or below the hint is
// corruption (refused, naming the file and offset); damage past it is a
// torn write of a change that was never answered (ignored, and dropped by
// the fold that follows at Open).
//
// A change records one topic's whole entry (or its removal) and the
// counters, so applying the journal again over a catalog that already
// holds it changes nothing: a crash between writing catalog.json and
// emptying the journal is harmless.

const (
	journalName      = "catalog.journal"
	journalMagic     = "FBCATJ01"
	journalHeaderLen = 24
	journalMaxRecord = 16 << 20 // a topic entry is far smaller
	// journalMinFold is the journal size below which it is never folded
	// on the create path (the catalog being smaller still).
	journalMinFold = 256 << 10
)

// catChange is one journal record: a topic's entry as it now is (Topic)
// or the id of a topic removed (Deleted), and the id counters after it.
type catChange struct {
	NextTopicID TopicID   `json:"next_topic_id"`
	NextGroupID GroupID   `json:"next_group_id"`
	Topic       *catTopic `json:"topic,omitempty"`
	Deleted     TopicID   `json:"deleted,omitempty"`
}

// apply makes the change in c: counters only grow, the entry replaces the
// one with its id (or is added), a removal removes it.
func (c *catalog) apply(ch catChange) {
	c.NextTopicID = max(c.NextTopicID, ch.NextTopicID)
	c.NextGroupID = max(c.NextGroupID, ch.NextGroupID)
	id := ch.Deleted
	if ch.Topic != nil {
		id = ch.Topic.ID
	}
	for i := range c.Topics {
		if c.Topics[i].ID != id {
			continue
		}
		if ch.Topic != nil {
			c.Topics[i] = *ch.Topic
		} else {
			c.Topics = append(c.Topics[:i:i], c.Topics[i+1:]...)
		}
		return
	}
	if ch.Topic != nil {
		c.Topics = append(c.Topics, *ch.Topic)
	}
}

// catJournal is the open journal of a broker. Its methods are called with
// Broker.mu held.
type catJournal struct {
	f    *os.File
	path string
	size int64 // bytes written, header included
	// err is set once an fsync failed: what the journal holds is then
	// unknown, so no later change is confirmed (until a restart).
	err error
}

// journalHeader encodes the header naming hint as the durable length.
func journalHeader(hint int64) []byte {
	h := make([]byte, journalHeaderLen)
	copy(h, journalMagic)
	binary.LittleEndian.PutUint64(h[8:], uint64(hint))
	binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h[:16]))
	return h
}

// createJournal writes an empty journal (replacing any) and syncs it and
// its directory.
func createJournal(dir string) error {
	return writeFileAtomic(dir, journalName, journalHeader(journalHeaderLen))
}

// readJournal applies the journal's changes to c. It returns the number of
// changes applied and the end of the last intact one; missing reports that
// there is no journal file.
func readJournal(dir string, c *catalog) (n int, end int64, missing bool, err error) {
	path := filepath.Join(dir, journalName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, true, nil
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("read %s: %w", path, err)
	}
	n, end, err = decodeJournal(b, c)
	if err != nil {
		return 0, 0, false, fmt.Errorf("%s: %w", path, err)
	}
	return n, end, false, nil
}

// decodeJournal applies the changes in a journal file's bytes to c.
func decodeJournal(b []byte, c *catalog) (n int, end int64, err error) {
	if len(b) < journalHeaderLen || string(b[:8]) != journalMagic {
		return 0, 0, errors.New("not a catalog journal (bad header)")
	}
	if crc32.ChecksumIEEE(b[:16]) != binary.LittleEndian.Uint32(b[16:]) {
		return 0, 0, errors.New("header checksum mismatch")
	}
	hint := int64(binary.LittleEndian.Uint64(b[8:]))
	if hint < journalHeaderLen || hint > int64(len(b)) {
		return 0, 0, fmt.Errorf("durable to offset %d but %d bytes long: truncated", hint, len(b))
	}
	off := int64(journalHeaderLen)
	for off < int64(len(b)) {
		rec, why := journalRecord(b, off)
		if why != "" {
			if off >= hint {
				break // a torn write, never answered
			}
			return 0, 0, fmt.Errorf("offset %d (durable to %d): %s", off, hint, why)
		}
		var ch catChange
		if err := decodeStrict(rec, &ch); err != nil {
			return 0, 0, fmt.Errorf("offset %d: %v", off, err)
		}
		if (ch.Topic == nil) == (ch.Deleted == 0) {
			return 0, 0, fmt.Errorf("offset %d: a change names no topic or two", off)
		}
		c.apply(ch)
		n++
		off += 8 + int64(len(rec))
	}
	if off < hint {
		return 0, 0, fmt.Errorf("durable to offset %d but the records end at %d", hint, off)
	}
	return n, off, nil
}

// journalRecord returns the body of the record at off, or why there is no
// intact one there.
func journalRecord(b []byte, off int64) (body []byte, why string) {
	if int64(len(b))-off < 8 {
		return nil, "a short record header"
	}
	l := int64(binary.LittleEndian.Uint32(b[off:]))
	sum := binary.LittleEndian.Uint32(b[off+4:])
	switch {
	case l == 0:
		return nil, "an empty record"
	case l > journalMaxRecord || off+8+l > int64(len(b)):
		return nil, fmt.Sprintf("a record of %d bytes passes the end", l)
	}
	body = b[off+8 : off+8+l]
	if crc32.ChecksumIEEE(body) != sum {
		return nil, "record checksum mismatch"
	}
	return body, ""
}

// openJournal opens dir's journal for appending at end (what readJournal
// returned: anything after it is a torn write and is overwritten).
func openJournal(dir string, end int64) (*catJournal, error) {
	path := filepath.Join(dir, journalName)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	j := &catJournal{f: f, path: path, size: end}
	if err := f.Truncate(end); err != nil {
		f.Close()
		return nil, fmt.Errorf("cut the torn tail of %s: %w", path, err)
	}
	return j, nil
}

// append writes ch and fsyncs it: the change is durable when it returns
// nil. A write that fails is cut off again; a failed fsync breaks the
// journal (every later append fails).
func (j *catJournal) append(ch catChange) error {
	if j.err != nil {
		return j.err
	}
	body, err := json.Marshal(ch)
	if err != nil {
		return fmt.Errorf("encode a catalog change: %w", err)
	}
	rec := make([]byte, 8, 8+len(body))
	binary.LittleEndian.PutUint32(rec, uint32(len(body)))
	binary.LittleEndian.PutUint32(rec[4:], crc32.ChecksumIEEE(body))
	rec = append(rec, body...)
	if _, err := j.f.WriteAt(rec, j.size); err != nil {
		if terr := j.f.Truncate(j.size); terr != nil {
			j.err = fmt.Errorf("write %s: %w (and cutting it back: %v)", j.path, err, terr)
			return j.err
		}
		return fmt.Errorf("write %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		j.err = fmt.Errorf("sync %s: %w", j.path, err)
		return j.err
	}
	j.size += int64(len(rec))
	// The hint is made durable by the next fsync; until then the change
	// reads as past the hint, which only matters if it is damaged.
	if _, err := j.f.WriteAt(journalHeader(j.size), 0); err != nil {
		j.err = fmt.Errorf("write %s: %w", j.path, err)
		return j.err
	}
	return nil
}

// records reports whether the journal holds any change.
func (j *catJournal) records() bool { return j.size > journalHeaderLen }

// reset empties the journal once its changes are in catalog.json.
func (j *catJournal) reset() error {
	if j.err != nil {
		return j.err
	}
	if err := j.f.Truncate(journalHeaderLen); err != nil {
		return fmt.Errorf("empty %s: %w", j.path, err)
	}
	if _, err := j.f.WriteAt(journalHeader(journalHeaderLen), 0); err != nil {
		return fmt.Errorf("empty %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		j.err = fmt.Errorf("sync %s: %w", j.path, err)
		return j.err
	}
	j.size = journalHeaderLen
	return nil
}

func (j *catJournal) close() error { return j.f.Close() }
