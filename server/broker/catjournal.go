package broker

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
)

// The catalog journal (catalog.journal) holds the catalog changes made
// since catalog.json was last written, so a topic or group change appends
// one small record and fsyncs it instead of rewriting the whole catalog
// (creates running at once share that fsync).
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
	// Index is the replicated catalog's index of the last change applied
	// (catrepl.go), on the record that ends that change; 0 elsewhere.
	Index uint64 `json:"index,omitempty"`
}

// apply makes the change in c: counters only grow, the entry replaces the
// one with its id (or is added), a removal removes it.
func (c *catalog) apply(ch catChange) {
	c.NextTopicID = max(c.NextTopicID, ch.NextTopicID)
	c.NextGroupID = max(c.NextGroupID, ch.NextGroupID)
	c.Index = max(c.Index, ch.Index)
	id := ch.Deleted
	if ch.Topic != nil {
		id = ch.Topic.ID
	} else if id == 0 {
		return // counters and index only (catrepl.go's mark)
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

// catJournal is the open journal of a broker, safe for concurrent use:
// appends are written one at a time and share fsyncs (the first waiting
// appender fsyncs for all that wrote before it: group commit). Lock order:
// Broker.mu before mu.
type catJournal struct {
	mu   sync.Mutex
	cond *sync.Cond // broadcast when an fsync ends
	f    *os.File
	path string
	// size: bytes written, header included; synced: bytes known durable;
	// syncing: an appender is fsyncing (without mu).
	size, synced int64
	syncing      bool
	// unapplied counts the changes written and not yet applied to the
	// broker's catalog (applied): a fold, which writes the catalog and
	// empties the journal, waits until there are none.
	unapplied int
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
		// A change names one topic, or none when it is the replicated
		// catalog's mark of an applied index (markIndex).
		if ch.Topic != nil && ch.Deleted != 0 || ch.Topic == nil && ch.Deleted == 0 && ch.Index == 0 {
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
	j := &catJournal{path: filepath.Join(dir, journalName)}
	j.cond = sync.NewCond(&j.mu)
	if err := j.openAt(end); err != nil {
		return nil, err
	}
	return j, nil
}

// openAt (with mu held, or before use) opens the journal file for
// appending at end.
func (j *catJournal) openAt(end int64) error {
	f, err := os.OpenFile(j.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", j.path, err)
	}
	if err := f.Truncate(end); err != nil {
		f.Close()
		return fmt.Errorf("cut the torn tail of %s: %w", j.path, err)
	}
	j.f, j.size, j.synced = f, end, end
	return nil
}

// append writes ch and waits until it is durable (nil) or failed. A
// write that fails is cut off again; a failed fsync breaks the journal
// (every later append fails). On nil the change counts as unapplied until
// the caller calls applied.
func (j *catJournal) append(ch catChange) error {
	body, err := json.Marshal(ch)
	if err != nil {
		return fmt.Errorf("encode a catalog change: %w", err)
	}
	rec := make([]byte, 8, 8+len(body))
	binary.LittleEndian.PutUint32(rec, uint32(len(body)))
	binary.LittleEndian.PutUint32(rec[4:], crc32.ChecksumIEEE(body))
	rec = append(rec, body...)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return j.err
	}
	if _, err := j.f.WriteAt(rec, j.size); err != nil {
		if terr := j.f.Truncate(j.size); terr != nil {
			j.err = fmt.Errorf("write %s: %w (and cutting it back: %v)", j.path, err, terr)
			return j.err
		}
		return fmt.Errorf("write %s: %w", j.path, err)
	}
	j.size += int64(len(rec))
	j.unapplied++
	end := j.size
	for j.synced < end {
		if j.err != nil {
			j.unapplied--
			return j.err
		}
		if j.syncing {
			j.cond.Wait()
			continue
		}
		j.syncing = true
		upto, f := j.size, j.f
		j.mu.Unlock()
		err := f.Sync()
		if err == nil {
			// The hint is made durable by the next fsync; until then
			// the changes read as past it, which only matters if they
			// are damaged.
			_, err = f.WriteAt(journalHeader(upto), 0)
		}
		j.mu.Lock()
		j.syncing = false
		if err != nil {
			j.err = fmt.Errorf("sync %s: %w", j.path, err)
		} else {
			j.synced = max(j.synced, upto)
		}
		j.cond.Broadcast()
	}
	return nil
}

// applied records that a change append made durable is in the catalog.
func (j *catJournal) applied() {
	j.mu.Lock()
	j.unapplied--
	j.mu.Unlock()
}

// broken reports whether an fsync failed: a change that failed may be on
// disk after all.
func (j *catJournal) broken() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err != nil
}

// records reports whether the journal holds any change.
func (j *catJournal) records() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.size > journalHeaderLen
}

func (j *catJournal) close() error { return j.f.Close() }
